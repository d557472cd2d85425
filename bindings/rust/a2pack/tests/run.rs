//! Runs: the upstream fixture, encode/decode round trips, bad input.

mod common;

use a2pack::{Board, Branches, Move, Run, RunBatch, RunKind, RunMeta, Status};

#[test]
fn fixture_decodes_to_documented_values() {
    let run = Run::load(common::fixture()).expect("the upstream fixture loads");
    let m = run.meta().unwrap();
    assert_eq!((m.steps, m.start_unix_s, m.max_score, m.highest_tile), (959, 1755927754, 20504, 2048));
    assert!((m.elapsed_s - 15.2595).abs() < 1e-3);
    assert_eq!(m.engine, None);
    assert_eq!(run.len(), 959);
    assert_eq!(run.source_kind(), RunKind::V2);
    let mut counts = [0usize; 4];
    for &mv in run.moves() {
        counts[mv as usize] += 1;
    }
    assert_eq!(counts, [78, 337, 253, 291]);
    assert_eq!(run.boards()[0], 0x0010000000000001);
    assert_eq!(run.final_board(), Board(0x100100010232001B));
    assert!(run.has_branches());
    assert!(run.steps().branch_present.iter().all(|&p| p == 1));
    // The chosen move is always legal.
    let s = run.steps();
    assert!(s.moves.iter().zip(&s.legal_masks).all(|(&mv, &mask)| mask & (1 << mv) != 0));
}

#[test]
fn fixture_reencodes_byte_exact() {
    let bytes = std::fs::read(common::fixture()).unwrap();
    let run = Run::decode(&bytes).unwrap();
    assert_eq!(run.encode(RunKind::V2).unwrap(), bytes);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("copy.a2run2");
    run.save(&out, RunKind::V2).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    // Rebuilt from its arrays, the run encodes to the same bytes again.
    let s = run.steps();
    let again = Run::new(
        &run.meta().unwrap(),
        &s.boards,
        &s.moves,
        Some(Branches { values: &s.values, legal_masks: &s.legal_masks, present: Some(&s.branch_present) }),
        run.final_board().0,
    )
    .unwrap();
    assert_eq!(again.encode(RunKind::V2).unwrap(), bytes);
    assert_eq!(again, run);
}

#[test]
fn v1_round_trip_upgrade_and_branch_refusal() {
    let meta =
        RunMeta { steps: 3, start_unix_s: 1, elapsed_s: 0.5, max_score: 4, highest_tile: 4, engine: Some("rs".into()) };
    let boards = [0x1000000000000001, 0x1100000000000000, 0x2000000000000010];
    let run = Run::new(&meta, &boards, &[2, 0, 3], None, 0x2000000000000011).unwrap();
    assert!(!run.has_branches());
    let v1 = run.encode(RunKind::V1).unwrap();
    assert_eq!(&v1[..4], b"A2T1");
    assert_eq!(RunKind::detect(&v1), RunKind::V1);
    let back = Run::decode(&v1).unwrap();
    assert_eq!(back.source_kind(), RunKind::V1);
    assert_eq!(back.meta().unwrap(), meta);
    assert_eq!(back.boards(), &boards);
    assert_eq!(Run::upgrade_v1(&v1).unwrap(), run.encode(RunKind::V2).unwrap());

    let fixture = Run::load(common::fixture()).unwrap();
    let err = fixture.encode(RunKind::V1).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(!err.message().is_empty());
    let dropped = fixture.encode_dropping_branches(RunKind::V1).unwrap();
    assert!(!Run::decode(&dropped).unwrap().has_branches());
}

#[test]
fn bad_input_is_an_error_with_the_librarys_message() {
    let bytes = std::fs::read(common::fixture()).unwrap();
    let err = Run::decode(&bytes[..bytes.len() / 2]).unwrap_err();
    assert_eq!(err.status(), Status::Corrupt);
    assert!(!err.message().is_empty(), "the library names what was wrong");
    assert!(err.to_string().starts_with("A2PACK_E_CORRUPT: "));

    let dir = tempfile::tempdir().unwrap();
    let torn = dir.path().join("torn.a2run2");
    std::fs::write(&torn, &bytes[..100]).unwrap();
    let err = Run::load(&torn).unwrap_err();
    assert_eq!(err.status(), Status::Corrupt);
    assert!(err.message().contains("torn.a2run2"), "{err}");

    let run = Run::decode(&bytes).unwrap();
    let err = run.steps_range(900, 100).unwrap_err();
    assert_eq!(err.status(), Status::OutOfRange);

    let err = Run::new(&RunMeta::default(), &[1, 2], &[0], None, 0).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}

#[test]
fn batch_columns_match_single_runs() {
    let fixture = std::fs::read(common::fixture()).unwrap();
    let gen = a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30);
    let payloads = vec![fixture.clone(), gen.run(3).unwrap().encode(RunKind::V1).unwrap(), fixture];
    let batch = RunBatch::decode(&payloads, 2).unwrap();
    let c = batch.columns();
    assert_eq!(c.n_runs(), 3);
    assert_eq!(c.source_kind, &[2, 1, 2]);
    for (r, p) in payloads.iter().enumerate() {
        let run = Run::decode(p).unwrap();
        let steps = c.run_steps(r);
        assert_eq!(&c.boards[steps.clone()], run.boards());
        assert_eq!(&c.moves[steps.clone()], run.moves());
        assert_eq!(&c.branch_values[steps], &run.steps().values[..]);
        assert_eq!(c.final_boards[r], run.final_board().0);
        assert_eq!(c.engine(r), run.meta().unwrap().engine.as_deref());
    }
    let err = RunBatch::decode(&[&b"A2T1\x01"[..]], 1).unwrap_err();
    assert_eq!(err.status(), Status::Corrupt);
}

#[test]
fn boards_follow_the_rules() {
    let board = Board::from_cells([1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(board.apply(Move::Left).cells()[..3], [2, 2, 0]);
    assert_eq!(board.apply(Move::Up), board);
    assert!(!board.legal_moves().contains(Move::Up));
    assert_eq!(Board(0).highest_tile(), 0);
    let run = Run::load(common::fixture()).unwrap();
    // Each step's board slides (then spawns) into the next one's.
    let (b, m) = (run.boards(), run.moves());
    for i in 0..b.len() - 1 {
        let slid = Board(b[i]).apply(Move::from_index(m[i]).unwrap());
        assert_ne!(slid, Board(b[i]), "step {i}: the move was legal");
    }
}

#[test]
fn batch_load_reads_files_and_names_the_bad_one() {
    let fixture = common::fixture();
    let batch = RunBatch::load(&[&fixture, &fixture], 2).expect("two copies of the fixture load");
    assert_eq!(batch.columns().n_runs(), 2);
    assert_eq!(batch.columns().step_offsets, &[0, 959, 1918]);
    assert_eq!(batch.payload_bytes(), 2 * std::fs::metadata(&fixture).unwrap().len());
    let dir = std::env::temp_dir().join(format!("a2pack-rs-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let torn = dir.join("torn.a2run2");
    let bytes = std::fs::read(&fixture).unwrap();
    std::fs::write(&torn, &bytes[..bytes.len() - 4]).unwrap();
    let err = RunBatch::load(&[fixture.clone(), torn.clone()], 1).unwrap_err();
    assert_eq!(err.status(), Status::Corrupt);
    assert!(err.message().starts_with(&format!("{}: ", torn.display())), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Datasets: a gather from Rust equals numpy's index of the same rows;
//! columns, SQL filters, split, sampler, append, bad input.

mod common;

use a2pack::{
    dataset, BuildOptions, ColumnsMut, Dataset, Mix, MixSource, OpenOptions, Sampler, SqlParam, Status, StepRow,
};

fn built(dir: &std::path::Path) -> std::path::PathBuf {
    let runs = dir.join("runs");
    common::gen_runs(&runs, 8, 21);
    let out = dir.join("ds");
    let mut calls = 0;
    let mut progress = |_: u64, _: u64| {
        calls += 1;
        true
    };
    let r = dataset::build(&runs, &out, &BuildOptions::new().workers(2), Some(&mut progress)).unwrap();
    assert_eq!(r.total_runs, 8);
    assert!(calls > 0);
    out
}

fn row_bytes(rows: &[StepRow]) -> Vec<u8> {
    // SAFETY: StepRow is 32 plain bytes, packed.
    unsafe { std::slice::from_raw_parts(rows.as_ptr().cast::<u8>(), rows.len() * 32) }.to_vec()
}

#[test]
fn gather_equals_numpy_index() {
    let dir = tempfile::tempdir().unwrap();
    let ds_dir = built(dir.path());
    let ds = Dataset::open(&ds_dir).unwrap();
    let n = ds.rows().len();
    let idx: Vec<usize> = (0..200).map(|k| (k * 7919 + 13) % n).collect();
    let rows = ds.gather_vec(&idx, 2).unwrap();
    for (k, &i) in idx.iter().enumerate() {
        assert_eq!(rows[k], ds.rows()[i]);
    }
    let Some(py) = common::python() else { return };
    let idx_text = idx.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let script = "import sys, numpy as np\n\
                  a = np.load(sys.argv[1] + '/steps.npy')\n\
                  idx = np.array([int(x) for x in sys.argv[2].split(',')], np.int64)\n\
                  sys.stdout.write(a[idx].tobytes().hex())";
    let hex = common::python_script(&py, script, &[&ds_dir, std::path::Path::new(&idx_text)]);
    let want: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    assert_eq!(row_bytes(&rows), want, "Rust's gather equals numpy's index of steps.npy");
}

#[test]
fn columns_filters_split_and_sampler() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open_with(built(dir.path()), &OpenOptions::new().mmap(true)).unwrap();
    assert!(ds.info().mapped);
    let idx = [3usize, 0, 5];
    let mut boards = vec![0u64; 3];
    let mut moves = vec![0u8; 3];
    let mut legal = vec![0u8; 12];
    let mut exps = vec![0u8; 48];
    ds.gather_columns(
        &idx,
        &mut ColumnsMut {
            boards: Some(&mut boards),
            moves: Some(&mut moves),
            legal: Some(&mut legal),
            exponents: Some(&mut exps),
            ..Default::default()
        },
        1,
    )
    .unwrap();
    for (k, &i) in idx.iter().enumerate() {
        let row = ds.rows()[i];
        assert_eq!(boards[k], row.board());
        assert_eq!(moves[k], row.mv());
        assert_eq!(&exps[k * 16..k * 16 + 16], &a2pack::Board(row.board()).cells());
        for m in 0..4 {
            assert_eq!(legal[k * 4 + m], (row.ev_legal() >> m) & 1);
        }
    }
    let err =
        ds.gather_columns(&idx, &mut ColumnsMut { boards: Some(&mut [0; 2]), ..Default::default() }, 1).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);

    let all = ds.select(None, &[]).unwrap();
    assert_eq!(all.len() as u64, ds.info().rows);
    let runs = ds.select_runs(Some("id BETWEEN ? AND ?"), &[SqlParam::Integer(2), SqlParam::Integer(4)]).unwrap();
    assert_eq!(runs, vec![2, 3, 4]);
    let steps = ds.select(Some("id = ?"), &[SqlParam::Integer(2)]).unwrap();
    assert!(steps.iter().all(|&i| ds.rows()[i].run_id() == 2));
    let err = ds.select(Some("no_such_column > ?"), &[SqlParam::Real(1.0)]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("no_such_column"), "{err}");

    let (train, val) = ds.split(None, &[], 0.0, 1, Some("id < ?"), &[SqlParam::Integer(2)]).unwrap();
    assert!(val.iter().all(|&i| ds.rows()[i].run_id() < 2));
    assert_eq!(train.len() + val.len(), all.len());
    assert!(ds.stats_json(1).unwrap().contains("\"rows\""));

    let mut s = Sampler::new(Some(&train), 0, 5, 16, true).unwrap();
    let b0 = s.batch(0).unwrap();
    assert_eq!(b0.len(), 16);
    assert!(b0.iter().all(|i| train.contains(i)));
    s.set_epoch(1).unwrap();
    assert_ne!(s.batch(0).unwrap(), b0);
    assert_eq!(s.batch(s.batch_count()).unwrap_err().status(), Status::OutOfRange);
    // As an iterator: the epoch's batches in order, then None; set_epoch starts over.
    let epoch1: Vec<Vec<usize>> = (0..s.batch_count()).map(|b| s.batch(b).unwrap()).collect();
    assert_eq!(s.len(), epoch1.len());
    assert_eq!(s.by_ref().collect::<Vec<_>>(), epoch1);
    assert_eq!(s.next(), None);
    s.set_epoch(1).unwrap();
    assert_eq!(s.next().as_ref(), epoch1.first());
}

#[test]
fn sampler_checkpoints_and_rank_parts() {
    let rows: Vec<usize> = (0..1000).map(|i| i * 3).collect();
    let mut s = Sampler::new(Some(&rows), 0, 9, 64, false).unwrap();
    s.set_epoch(2).unwrap();
    s.by_ref().take(5).for_each(drop);
    let state = s.state().unwrap();
    assert!(state.len() < 128, "O(1) bytes, got {}", state.len());
    let rest: Vec<Vec<usize>> = s.by_ref().collect();
    // Restored in a fresh sampler with another seed: it adopts the saved
    // seed and epoch and goes on from batch 5.
    let mut r = Sampler::new(Some(&rows), 0, 1234, 64, false).unwrap();
    r.load_state(&state).unwrap();
    assert_eq!((r.epoch(), r.position()), (2, 5));
    assert_eq!(r.by_ref().collect::<Vec<_>>(), rest);
    // Every world size's parts make the global batch, in order.
    for world in 1..=5u32 {
        let joined: Vec<usize> = (0..world).flat_map(|k| r.part(7, k, world).unwrap()).collect();
        assert_eq!(joined, r.batch(7).unwrap(), "world {world}");
    }
    assert_eq!(r.part(0, 3, 3).unwrap_err().status(), Status::InvalidArgument);
    // Other indices, batch size or drop_last: refused, the sampler unchanged.
    for mut other in [
        Sampler::new(Some(&rows[1..]), 0, 9, 64, false).unwrap(),
        Sampler::new(Some(&rows), 0, 9, 32, false).unwrap(),
        Sampler::new(Some(&rows), 0, 9, 64, true).unwrap(),
    ] {
        let before = other.batch(0).unwrap();
        let err = other.load_state(&state).unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{err}");
        assert_eq!((other.position(), other.batch(0).unwrap()), (0, before));
    }
    let mut cut = state.clone();
    cut.pop();
    assert!(r.load_state(&cut).is_err());
}

#[test]
fn mix_has_exact_proportions_and_resumes() {
    let old: Vec<usize> = (0..300).collect();
    let new: Vec<usize> = (300..1000).collect();
    let sources = [MixSource::Rows(&old), MixSource::Rows(&new), MixSource::All(50)];
    let mut m = Mix::new(&sources, &[1.0, 3.0, 0.0], 4, 100).unwrap();
    for b in 0..20 {
        assert_eq!(m.counts(b).unwrap(), vec![25, 75, 0]);
    }
    let first: Vec<_> = m.by_ref().take(8).map(Result::unwrap).collect();
    for batch in &first {
        assert_eq!(batch.rows.len(), 100);
        for (&row, &src) in batch.rows.iter().zip(&batch.sources) {
            assert!(if src == 0 { row < 300 } else { (300..1000).contains(&row) });
        }
    }
    // Ranks' parts of a batch make the batch.
    let whole = m.part(8, 0, 1).unwrap();
    let joined: Vec<usize> = (0..3).flat_map(|k| m.part(8, k, 3).unwrap().rows).collect();
    assert_eq!(joined, whole.rows);
    let state = m.state().unwrap();
    let ahead: Vec<_> = m.by_ref().take(6).map(Result::unwrap).collect();
    let mut r = Mix::new(&sources, &[5.0, 5.0, 5.0], 99, 100).unwrap();
    r.load_state(&state).unwrap();
    assert_eq!(r.position(), 8);
    assert_eq!(r.weights().unwrap(), vec![1.0, 3.0, 0.0]);
    assert_eq!(r.by_ref().take(6).map(Result::unwrap).collect::<Vec<_>>(), ahead);
    // Weights changed at a checkpoint apply from the next batch on.
    r.set_weights(&[1.0, 1.0, 2.0]).unwrap();
    assert_eq!(r.counts(r.position()).unwrap(), vec![25, 25, 50]);
    assert_eq!(r.part(0, 0, 1).unwrap_err().status(), Status::OutOfRange);
    // A state of other sources is refused.
    let mut other = Mix::new(&[MixSource::Rows(&old), MixSource::All(50)], &[1.0, 1.0], 4, 100).unwrap();
    assert!(other.load_state(&state).is_err());
    assert_eq!(Mix::new(&sources, &[1.0], 4, 100).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn append_verify_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let ds_dir = built(dir.path());
    let more = dir.path().join("more");
    common::gen_runs(&more, 2, 99);
    let r = dataset::append(&ds_dir, &more, &BuildOptions::new(), None).unwrap();
    assert_eq!((r.runs_added, r.total_runs), (2, 10));
    assert!(!r.steps_copied, "extended in place");
    // The same runs again: refused, naming them, unless duplicates are allowed.
    let err = dataset::append(&ds_dir, &more, &BuildOptions::new(), None).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("2 of the 2 runs to append are already in the dataset"), "{err}");
    let opts = BuildOptions::new().copy_steps(true).allow_duplicates(true);
    let r = dataset::append(&ds_dir, &more, &opts, None).unwrap();
    assert_eq!((r.runs_added, r.total_runs, r.steps_copied), (2, 12, true));
    assert_eq!(r.runs_duplicated, 2);
    let report = dataset::verify(&ds_dir, false, 1).unwrap();
    assert!(report.contains("\"ok\": true") || report.contains("\"ok\":true"), "{report}");

    let ds = Dataset::open(&ds_dir).unwrap();
    let rows = ds.rows().len();
    let err = ds.gather_vec(&[0, rows], 1).unwrap_err();
    assert_eq!(err.status(), Status::OutOfRange);
    assert!(err.message().contains(&rows.to_string()), "{err}");
    drop(ds);

    // Flip one row byte: the manifest's CRC catches it.
    let steps = ds_dir.join("steps.npy");
    let mut bytes = std::fs::read(&steps).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0x40;
    std::fs::write(&steps, &bytes).unwrap();
    let err = Dataset::open(&ds_dir).unwrap_err();
    assert_eq!(err.status(), Status::Checksum);
    assert!(err.message().contains("steps.npy"), "{err}");
    assert!(dataset::verify(&ds_dir, false, 1).is_err());

    // Building over an existing folder needs overwrite.
    let err = dataset::build(&more, &ds_dir, &BuildOptions::new(), None).unwrap_err();
    assert!(!err.message().is_empty());
    dataset::build(&more, &ds_dir, &BuildOptions::new().overwrite(true), None).unwrap();
}

#[test]
fn a_dataset_is_shared_between_threads() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built(dir.path())).unwrap();
    let n = ds.rows().len();
    std::thread::scope(|s| {
        for t in 0..2 {
            let ds = &ds;
            s.spawn(move || {
                let idx: Vec<usize> = (t..n).step_by(2).collect();
                let rows = ds.gather_vec(&idx, 1).unwrap();
                assert_eq!(rows[0], ds.rows()[t]);
            });
        }
    });
}

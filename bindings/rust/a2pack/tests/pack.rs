//! Packs: a pack the CLI built (stored, zstd or lz4 entries) reads identically from Rust; the Rust builder,
//! iteration, statistics, export, bad input and callbacks.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;

use a2pack::{
    pack_dir, JsonlMode, Pack, PackCompression, PackIterOptions, PackOptions, PackWriter, PackWriterOptions, Run,
    Status,
};

#[test]
fn pack_built_by_the_cli_reads_identically() {
    let Some(cli) = common::cli() else { return };
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    common::run(
        Command::new(&cli)
            .args(["-q", "gen", "-n", "12", "--policy", "greedy", "--max-steps", "80", "-s", "5", "-o"])
            .arg(&runs),
    );
    std::fs::copy(common::fixture(), runs.join("zz-fixture.a2run2")).unwrap();
    let files = common::run_files(&runs);
    for (compress, name) in [("none", "plain.a2pack"), ("zstd", "zstd.a2pack"), ("lz4", "lz4.a2pack")] {
        let out = dir.path().join(name);
        common::run(
            Command::new(&cli)
                .args(["-q", "pack", "--compress", compress, "-j", "2", "-i"])
                .arg(&runs)
                .arg("-o")
                .arg(&out),
        );
        let pack = Pack::open(&out).unwrap();
        assert_eq!(pack.len(), files.len() as u64);
        for (i, f) in files.iter().enumerate() {
            let bytes = std::fs::read(f).unwrap();
            assert_eq!(pack.read(i as u64).unwrap(), bytes, "{name} entry {i}");
            if compress == "none" {
                assert_eq!(pack.get_slice(i as u64).unwrap(), &bytes[..]);
            } else {
                let e = pack.entry(i as u64).unwrap();
                let compressed = if compress == "zstd" { e.zstd && !e.lz4 } else { e.lz4 && !e.zstd };
                assert!(compressed || e.length as usize == bytes.len(), "{name} entry {i}: {e:?}");
                assert_eq!(e.raw_length as usize, bytes.len());
            }
            assert_eq!(pack.decode(i as u64).unwrap(), Run::load(f).unwrap());
        }
        let stats = pack.stats(0).unwrap();
        let total: u64 = files.iter().map(|f| u64::from(Run::load(f).unwrap().meta().unwrap().steps)).sum();
        assert_eq!((stats.count, stats.total_steps, stats.max_len), (files.len() as u64, total, 959));
        // The CLI's own stats agree with what Rust reads.
        let printed = common::run(Command::new(&cli).args(["stats", "--packfile"]).arg(&out));
        assert!(printed.contains(&total.to_string()), "{printed}");
        pack.validate(true, 2, None).unwrap();
    }
}

fn small_pack(dir: &std::path::Path, n: u64) -> std::path::PathBuf {
    let runs = dir.join("runs");
    common::gen_runs(&runs, n, 9);
    let out = dir.join("small.a2pack");
    let mut done = Vec::new();
    let mut progress = |d: u64, t: u64| {
        done.push((d, t));
        true
    };
    let summary = pack_dir(
        &runs,
        &out,
        PackWriterOptions::new().compression(PackCompression::Zstd).workers(2),
        Some(&mut progress),
    )
    .unwrap();
    assert_eq!(summary.entries, n);
    assert_eq!(done.last(), Some(&(n, n)));
    out
}

#[test]
fn writer_iteration_permutation_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_pack(dir.path(), 10);
    let pack = Pack::open(&path).unwrap();

    // A pack rewritten entry by entry from Rust holds the same runs.
    let copy = dir.path().join("copy.a2pack");
    let mut w = PackWriter::create(&copy, &PackWriterOptions::new().align(64)).unwrap();
    for i in 0..pack.len() {
        w.add(&pack.read(i).unwrap()).unwrap();
    }
    assert!(w.add(b"not a run").is_err(), "invalid bytes are refused");
    assert_eq!(w.count(), 10);
    assert!(!copy.exists(), "nothing appears before finish");
    assert_eq!(w.finish().unwrap().entries, 10);
    let copy = Pack::open(&copy).unwrap();
    for i in 0..10 {
        assert_eq!(copy.decode(i).unwrap(), pack.decode(i).unwrap());
    }

    // An abandoned writer leaves nothing.
    let abandoned = dir.path().join("abandoned.a2pack");
    let mut w = PackWriter::create(&abandoned, &PackWriterOptions::new()).unwrap();
    w.add(&pack.read(0).unwrap()).unwrap();
    drop(w);
    assert!(!abandoned.exists());

    let perm = pack.permutation(true, 3).unwrap();
    assert_eq!(perm, pack.permutation(true, 3).unwrap());
    let mut sorted = perm.clone();
    sorted.sort();
    assert_eq!(sorted, (0..10).collect::<Vec<u64>>());

    let mut seen = Vec::new();
    for batch in pack.iter(&PackIterOptions::new().batch_size(4).shuffle(3).workers(2)).unwrap() {
        let batch = batch.unwrap();
        let direct = pack.decode_batch(&batch.indices, 1).unwrap();
        assert_eq!(batch.runs.columns().boards, direct.columns().boards);
        seen.extend(batch.indices);
    }
    assert_eq!(seen, perm, "the shuffled epoch follows permutation(seed)");

    let runs = pack.decode_runs(&[9, 0], 2).unwrap();
    assert_eq!(runs[0], pack.decode(9).unwrap());

    let jsonl = dir.path().join("runs.jsonl");
    let bytes = pack.to_jsonl(&jsonl, JsonlMode::Runs, 2, None).unwrap();
    let text = std::fs::read_to_string(&jsonl).unwrap();
    assert_eq!(bytes as usize, text.len());
    assert_eq!(text.lines().count(), 10);

    let hist = pack.histograms(0).unwrap();
    assert_eq!(hist.tiles.iter().map(|t| t.1).sum::<u64>(), 10);
}

#[test]
fn bad_input_and_out_of_range_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_pack(dir.path(), 3);
    let pack = Pack::open(&path).unwrap();
    let err = pack.decode(3).unwrap_err();
    assert_eq!(err.status(), Status::OutOfRange);
    assert!(err.message().contains("small.a2pack"), "{err}");
    assert_eq!(pack.decode_batch(&[0, 7], 1).unwrap_err().status(), Status::OutOfRange);

    let unmapped = Pack::open_with(&path, &PackOptions::new().mmap(false)).unwrap();
    assert_eq!(unmapped.get_slice(0).unwrap_err().status(), Status::Unsupported);
    assert_eq!(unmapped.read(1).unwrap(), pack.read(1).unwrap());

    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xFF; // inside the footer
    let bad = dir.path().join("bad.a2pack");
    std::fs::write(&bad, &bytes).unwrap();
    let err = Pack::open(&bad).unwrap_err();
    assert!(matches!(err.status(), Status::Corrupt | Status::Checksum), "{err}");
    assert!(err.message().contains("bad.a2pack"), "{err}");

    // A flipped payload byte fails that entry alone, naming it.
    let mut bytes = std::fs::read(&path).unwrap();
    let e = pack.entry(1).unwrap();
    bytes[e.offset as usize + 2] ^= 0xFF;
    std::fs::write(&bad, &bytes).unwrap();
    let damaged = Pack::open(&bad).unwrap();
    assert_eq!(damaged.decode(1).unwrap_err().status(), Status::Checksum);
    assert!(damaged.decode(0).is_ok() && damaged.decode(2).is_ok());
    assert!(damaged.validate(true, 1, None).is_err());

    assert_eq!(Pack::open(dir.path().join("none.a2pack")).unwrap_err().status(), Status::NotFound);
}

#[test]
fn progress_closures_stop_and_panics_never_cross_into_c() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_pack(dir.path(), 4);
    let pack = Pack::open(&path).unwrap();

    let mut stop = |_: u64, _: u64| false;
    let err = pack.validate(true, 1, Some(&mut stop)).unwrap_err();
    assert_eq!(err.status(), Status::Interrupted);

    let mut boom = |_: u64, _: u64| -> bool { panic!("progress closure panicked") };
    let caught = catch_unwind(AssertUnwindSafe(|| pack.validate(true, 1, Some(&mut boom))));
    let payload = caught.expect_err("the panic comes back to the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"progress closure panicked"));
    // The library is fine afterwards.
    pack.validate(true, 1, None).unwrap();

    // The bad-input closure of a writer: called for each skipped file.
    let runs = dir.path().join("mixed");
    common::gen_runs(&runs, 2, 1);
    std::fs::write(runs.join("broken.a2run2"), b"A2T1\x01garbage").unwrap();
    let skipped = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = skipped.clone();
    let opts = PackWriterOptions::new()
        .skip_bad(true)
        .on_bad_input(move |p, e| s2.lock().unwrap().push((p.to_path_buf(), e.status())));
    let summary = pack_dir(&runs, dir.path().join("mixed.a2pack"), opts, None).unwrap();
    assert_eq!((summary.entries, summary.skipped), (2, 1));
    let skipped = skipped.lock().unwrap();
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].0.ends_with("broken.a2run2"));

    let opts = PackWriterOptions::new().skip_bad(true).on_bad_input(|_, _| panic!("bad-input closure panicked"));
    let caught = catch_unwind(AssertUnwindSafe(|| pack_dir(&runs, dir.path().join("m2.a2pack"), opts, None)));
    assert!(caught.is_err());
}

#[test]
fn a_pack_is_shared_between_threads() {
    let dir = tempfile::tempdir().unwrap();
    let pack = Pack::open(small_pack(dir.path(), 6)).unwrap();
    // A Run is Send but not Sync (the header documents no sharing of one):
    // the threads compare encodings.
    let expected: Vec<Vec<u8>> = (0..6).map(|i| pack.decode(i).unwrap().encode(a2pack::RunKind::V2).unwrap()).collect();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let (pack, expected) = (&pack, &expected);
            s.spawn(move || {
                for i in (t..6).step_by(3) {
                    assert_eq!(pack.decode(i).unwrap().encode(a2pack::RunKind::V2).unwrap(), expected[i as usize]);
                    assert!(!pack.get_slice(i).unwrap().is_empty());
                }
            });
        }
    });
    // Handles move between threads.
    let moved = std::thread::spawn(move || pack.len()).join().unwrap();
    assert_eq!(moved, 6);
}

#[test]
fn lz4_packs_written_from_rust_read_back_and_levels_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    common::gen_runs(&runs, 6, 3);
    let plain = dir.path().join("plain.a2pack");
    pack_dir(&runs, &plain, PackWriterOptions::new(), None).unwrap();
    let fast = dir.path().join("fast.a2pack");
    let hc = dir.path().join("hc.a2pack");
    let s_fast = pack_dir(&runs, &fast, PackWriterOptions::new().compression(PackCompression::Lz4), None).unwrap();
    let s_hc =
        pack_dir(&runs, &hc, PackWriterOptions::new().compression(PackCompression::Lz4).lz4_level(12), None).unwrap();
    assert!(s_hc.stored_bytes <= s_fast.stored_bytes && s_fast.stored_bytes < s_fast.input_bytes);
    let (p, f, h) = (Pack::open(&plain).unwrap(), Pack::open(&fast).unwrap(), Pack::open(&hc).unwrap());
    for i in 0..p.len() {
        assert_eq!(f.read(i).unwrap(), p.read(i).unwrap());
        assert_eq!(h.decode(i).unwrap(), p.decode(i).unwrap());
        if f.entry(i).unwrap().lz4 {
            assert!(f.entry(i).unwrap().length < f.entry(i).unwrap().raw_length);
        }
    }
    f.validate(true, 2, None).unwrap();
    let err = pack_dir(
        &runs,
        dir.path().join("bad.a2pack"),
        PackWriterOptions::new().compression(PackCompression::Lz4).lz4_level(13),
        None,
    )
    .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("lz4 level"), "{err}");
    assert!(a2pack::lz4_version().split('.').count() == 3, "{}", a2pack::lz4_version());
}

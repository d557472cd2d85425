//! The safe crate's overhead over the C API: pack `decode_batch` and dataset
//! `gather` through `a2pack` against the same calls made directly through
//! `a2pack-sys` (exactly what a C program calls), on the same data in one
//! process. Rounds alternate between the two so both see the same machine
//! state; the figure is the ratio of medians.
//!
//! cargo bench --bench overhead [-- ROUNDS]
//!
//! A plain timing loop rather than criterion: the quantity is a ratio of two
//! medians measured side by side, which needs nothing more, and criterion's
//! build would dominate `cargo test --all-targets` on small machines.

use std::hint::black_box;
use std::time::Instant;

use a2pack::{sys, BuildOptions, Dataset, GenOptions, Pack, PackWriterOptions, Policy, StepRow};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// SplitMix64, for the benchmark's random indices.
fn rand_indices(n: usize, below: u64, mut seed: u64) -> Vec<u64> {
    (0..n)
        .map(|_| {
            seed = seed.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            (z ^ (z >> 31)) % below
        })
        .collect()
}

fn compare(name: &str, rounds: usize, mut safe: impl FnMut(), mut raw: impl FnMut()) {
    for _ in 0..3 {
        safe();
        raw();
    }
    let (mut ts, mut tr) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        safe();
        ts.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        raw();
        tr.push(t.elapsed().as_secs_f64());
    }
    let (ms, mr) = (median(ts), median(tr));
    println!(
        "{name:<34} rust {:>9.1} us   c {:>9.1} us   overhead {:+.2} %",
        ms * 1e6,
        mr * 1e6,
        (ms / mr - 1.0) * 100.0
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes --bench; under `cargo test --all-targets` the
    // binary runs as a quick smoke test on small data instead.
    let bench = std::env::args().any(|a| a == "--bench");
    let default_rounds = if bench { 200 } else { 2 };
    let rounds: usize =
        std::env::args().skip(1).find(|a| !a.starts_with('-')).map_or(Ok(default_rounds), |a| a.parse())?;
    let n_runs = if bench { 1000 } else { 40 };
    let dir = tempfile::tempdir()?;
    let runs = dir.path().join("runs");
    GenOptions::new().policy(Policy::Greedy).max_steps(400).write_dir(&runs, n_runs, 11)?;
    let pack_path = dir.path().join("bench.a2pack");
    a2pack::pack_dir(&runs, &pack_path, PackWriterOptions::new(), None)?;
    let ds_dir = dir.path().join("ds");
    a2pack::dataset::build(&runs, &ds_dir, &BuildOptions::new(), None)?;
    let pack = Pack::open(&pack_path)?;
    let ds = Dataset::open(&ds_dir)?;
    println!(
        "a2pack {} | pack: {} runs; dataset: {} rows | {rounds} rounds, medians",
        a2pack::version(),
        pack.len(),
        ds.info().rows
    );

    for &(n, workers) in &[(64usize, 1u32), (256, 0)] {
        let idx = rand_indices(n, pack.len(), 5);
        compare(
            &format!("pack decode_batch n={n} workers={workers}"),
            rounds,
            || {
                let b = pack.decode_batch(&idx, workers).unwrap();
                black_box(b.columns().boards.len());
            },
            || unsafe {
                let mut out = std::ptr::null_mut();
                let st = sys::a2pack_pack_decode_batch(pack.as_ptr(), idx.as_ptr(), idx.len(), workers, 0, &mut out);
                assert_eq!(st, 0);
                let mut c = sys::a2pack_run_columns {
                    size: std::mem::size_of::<sys::a2pack_run_columns>(),
                    ..Default::default()
                };
                sys::a2pack_run_batch_columns(out, &mut c);
                black_box(c.n_steps);
                sys::a2pack_run_batch_close(out);
            },
        );
    }

    let rows = ds.info().rows;
    for &(n, workers) in &[(1024usize, 1u32), (65536, 0)] {
        let idx: Vec<usize> = rand_indices(n, rows, 9).into_iter().map(|i| i as usize).collect();
        let mut a = vec![StepRow::default(); n];
        let mut b = vec![StepRow::default(); n];
        // The dataset's raw handle, for the C-side call.
        let raw = dataset_raw(&ds);
        compare(
            &format!("dataset gather n={n} workers={workers}"),
            rounds,
            || {
                ds.gather(&idx, &mut a, workers).unwrap();
                black_box(&a);
            },
            || unsafe {
                let st =
                    sys::a2pack_dataset_gather(raw, idx.as_ptr().cast(), idx.len(), b.as_mut_ptr().cast(), workers);
                assert_eq!(st, 0);
                black_box(&b);
            },
        );
        assert_eq!(a, b);
    }
    Ok(())
}

fn dataset_raw(ds: &Dataset) -> *const sys::a2pack_dataset {
    ds.as_ptr()
}

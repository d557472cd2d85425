//! Replay orders and sharded datasets through the one feed from Rust:
//! windows of one run's consecutive steps, endless seeded draws, prioritized
//! draws with weights, a sharded dataset within a budget, and bad input
//! refused.

mod common;

use a2pack::{
    dataset, BuildOptions, Dataset, Feed, FeedColumn, FeedOptions, Pin, Priorities, ReplayOptions, ShardFeedOptions,
    Status,
};

fn built(dir: &std::path::Path, shard_rows: u64) -> std::path::PathBuf {
    let runs = dir.join("runs");
    common::gen_runs(&runs, 12, 5);
    let out = dir.join("ds");
    dataset::build(&runs, &out, &BuildOptions::new().workers(1).shard_rows(shard_rows), None).unwrap();
    out
}

fn opts(batch: u64) -> FeedOptions {
    FeedOptions::new().batch_size(batch).pin(Pin::Off).seed(3).columns(&[
        FeedColumn::RunIds,
        FeedColumn::Indices,
        FeedColumn::Weights,
    ])
}

#[test]
fn windows_are_consecutive_steps_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built(dir.path(), 0)).unwrap();
    let replay = ReplayOptions::new().window(8);
    let mut f = Feed::open_replay(&ds, &replay, None, &opts(4).epochs(1)).unwrap();
    let mut windows = 0;
    while let Some(b) = f.next_batch().unwrap() {
        let (idx, runs) = (b.indices().unwrap(), b.run_ids().unwrap());
        assert_eq!(idx.len() % 8, 0);
        for (w, r) in idx.chunks(8).zip(runs.chunks(8)) {
            assert!(w.windows(2).all(|p| p[1] == p[0] + 1));
            assert!(r.iter().all(|&x| x == r[0]));
            windows += 1;
        }
    }
    assert!(windows > 0);
    let err = Feed::open_replay(&ds, &ReplayOptions::new().window(0), None, &opts(4)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("window"), "{err}");
}

#[test]
fn draws_with_replacement_are_endless_and_seeded() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built(dir.path(), 0)).unwrap();
    let replay = ReplayOptions::new().replacement(true);
    let take = |seed: u64| {
        let mut f = Feed::open_replay(&ds, &replay, None, &opts(32).seed(seed).epochs(1)).unwrap();
        (0..20).map(|_| f.next_batch().unwrap().unwrap().indices().unwrap().to_vec()).collect::<Vec<_>>()
    };
    assert_eq!(take(1), take(1));
    assert_ne!(take(1), take(2));
}

#[test]
fn prioritized_draws_skip_zero_priorities_and_carry_weights() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built(dir.path(), 0)).unwrap();
    let n = ds.rows().len() as u64;
    let pr = Priorities::new(n, 0.6, 0.4, 1.0).unwrap();
    let evens: Vec<usize> = (0..n as usize).step_by(2).collect();
    pr.update(&evens, &vec![0.0; evens.len()]).unwrap();
    let mut f = Feed::open_replay(&ds, &ReplayOptions::new(), Some(&pr), &opts(64)).unwrap();
    for _ in 0..10 {
        let b = f.next_batch().unwrap().unwrap();
        assert!(b.indices().unwrap().iter().all(|i| i % 2 == 1));
        let w = b.weights().unwrap();
        assert!(w.iter().all(|&x| x > 0.0 && x <= 1.0 + 1e-6));
        assert!(w.iter().any(|&x| (x - 1.0).abs() < 1e-6)); // normalised by the batch's largest
        drop(b);
        pr.update(&[1], &[5.0]).unwrap();
    }
    let err = pr.update(&[n as usize], &[1.0]).unwrap_err();
    assert_eq!(err.status(), Status::OutOfRange);
    let path = dir.path().join("p.npy");
    pr.save(&path).unwrap();
    let back = Priorities::load(&path, 0.6, 0.4, n).unwrap();
    assert_eq!(back.get(&[0, 1]).unwrap(), vec![0.0, 5.0]);
    assert_eq!(Priorities::load(&path, 0.6, 0.4, n + 1).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn a_sharded_dataset_is_fed_every_row_once_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let ds_dir = built(dir.path(), 100);
    let rows = Dataset::open(&ds_dir).unwrap().rows().len();
    let shards = ShardFeedOptions::new().budget_bytes(1 << 20);
    let mut f = Feed::open_shards(&ds_dir, &shards, &opts(32).epochs(1)).unwrap();
    let mut seen = Vec::new();
    while let Some(b) = f.next_batch().unwrap() {
        seen.extend_from_slice(b.indices().unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..rows).collect::<Vec<_>>());
    let err = Feed::open_shards(&ds_dir, &ShardFeedOptions::new().budget_bytes(1000), &opts(32)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}

//! Replay orders and sharded datasets through the one feed from Rust:
//! windows of one run's consecutive steps shaped [windows, T, ...], short
//! runs skipped or padded, endless seeded draws, the newest rows only,
//! prioritized draws with weights, a sharded dataset within a budget, and
//! bad input refused.

mod common;

use a2pack::{
    dataset, BuildOptions, Dataset, Feed, FeedColumn, FeedOptions, GenOptions, Pin, Policy, Priorities, ReplayOptions,
    RunKind, ShardFeedOptions, ShardStream, ShardStreamOptions, Status,
};

fn built(dir: &std::path::Path, shard_rows: u64) -> std::path::PathBuf {
    let runs = dir.join("runs");
    common::gen_runs(&runs, 12, 5);
    let out = dir.join("ds");
    dataset::build(&runs, &out, &BuildOptions::new().workers(1).shard_rows(shard_rows), None).unwrap();
    out
}

/// (first row, length) of each run, in row order.
fn runs_of(ds: &Dataset) -> Vec<(usize, usize)> {
    let rows = ds.rows();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        match runs.last_mut() {
            Some((first, n)) if rows[*first].run_id() == r.run_id() => *n += 1,
            _ => runs.push((i, 1)),
        }
    }
    runs
}

/// A dataset of runs of 12, 19, .. 54 steps (`gen_runs` plays each to its
/// step limit).
fn built_with_run_lengths(dir: &std::path::Path) -> std::path::PathBuf {
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    for i in 0..7u32 {
        let run = GenOptions::new().policy(Policy::Greedy).max_steps(12 + 7 * i).run(u64::from(i) + 1).unwrap();
        run.save(runs.join(format!("run-{i:06}.a2run2")), RunKind::V2).unwrap();
    }
    let out = dir.join("ds");
    dataset::build(&runs, &out, &BuildOptions::new().workers(1), None).unwrap();
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
    let cols = [FeedColumn::RunIds, FeedColumn::Indices, FeedColumn::Exponents, FeedColumn::Valid];
    let mut f = Feed::open_replay(&ds, &replay, None, &opts(4).columns(&cols).epochs(1)).unwrap();
    assert_eq!(f.window(), 8);
    let mut starts = Vec::new();
    while let Some(b) = f.next_batch().unwrap() {
        assert_eq!(b.window(), 8);
        assert_eq!(b.len(), b.windows() * 8);
        assert_eq!(b.shape(FeedColumn::Indices).unwrap(), [b.windows(), 8]);
        assert_eq!(b.shape(FeedColumn::Exponents).unwrap(), [b.windows(), 8, 16]);
        let (idx, runs) = (b.indices().unwrap(), b.run_ids().unwrap());
        assert_eq!(b.exponents().unwrap().chunks_exact(8 * 16).count(), b.windows());
        for (w, r) in idx.chunks_exact(b.window()).zip(runs.chunks_exact(b.window())) {
            assert!(w.windows(2).all(|p| p[1] == p[0] + 1), "{w:?}");
            assert!(r.iter().all(|&x| x == r[0]), "{r:?}");
            starts.push(w[0]);
        }
        assert!(b.valid().unwrap().iter().all(|&v| v == 1));
    }
    // Stride 1: a window at every step one fits after, each once an epoch.
    let mut want: Vec<usize> = runs_of(&ds).into_iter().flat_map(|(f, n)| f..(f + n + 1).saturating_sub(8)).collect();
    starts.sort_unstable();
    want.sort_unstable();
    assert!(!want.is_empty());
    assert_eq!(starts, want);
    let err = Feed::open_replay(&ds, &ReplayOptions::new().window(0), None, &opts(4)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("window"), "{err}");
    let err = Feed::open_replay(&ds, &ReplayOptions::new().window(8).stride(3), None, &opts(4)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("stride"), "{err}");
}

#[test]
fn runs_shorter_than_a_window_are_skipped_or_padded() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built_with_run_lengths(dir.path())).unwrap();
    let runs = runs_of(&ds);
    let t = 20;
    assert!(runs.iter().any(|&(_, n)| n < t) && runs.iter().any(|&(_, n)| n >= 2 * t), "{runs:?}");
    let cols = [FeedColumn::Indices, FeedColumn::Valid];
    let tiles = |pad: bool| {
        let replay = ReplayOptions::new().window(t as u64).stride(t as u64).pad_short(pad);
        let f = Feed::open_replay(&ds, &replay, None, &opts(2).columns(&cols).shuffle(false).epochs(1)).unwrap();
        let mut out = Vec::new();
        for b in f {
            let b = b.unwrap();
            for (w, v) in b.indices().unwrap().chunks_exact(t).zip(b.valid().unwrap().chunks_exact(t)) {
                out.push((w.to_vec(), v.to_vec()));
            }
        }
        out
    };
    // Stride t: each run's non-overlapping tiles, a shorter tail left out.
    let tile_starts: Vec<usize> = runs.iter().flat_map(|&(f, n)| (0..n / t).map(move |k| f + k * t)).collect();
    let mut skipped = tiles(false);
    skipped.sort();
    assert_eq!(skipped.iter().map(|(w, _)| w[0]).collect::<Vec<_>>(), tile_starts);
    assert!(skipped.iter().all(|(w, v)| w.windows(2).all(|p| p[1] == p[0] + 1) && v.iter().all(|&x| x == 1)));
    let padded = tiles(true);
    assert_eq!(padded.len(), runs.iter().map(|&(_, n)| (n / t).max(1)).sum::<usize>());
    for &(first, n) in runs.iter().filter(|&&(_, n)| n < t) {
        let (w, v) = padded.iter().find(|(w, _)| w[0] == first).unwrap();
        assert!(v[..n].iter().all(|&x| x == 1) && v[n..].iter().all(|&x| x == 0), "{v:?}");
        assert!(w[n..].iter().all(|&i| i == first + n - 1), "{w:?}"); // the last step, repeated
    }
    let longest = runs.iter().map(|&(_, n)| n).max().unwrap() as u64;
    let err = Feed::open_replay(&ds, &ReplayOptions::new().window(longest + 1), None, &opts(2)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}

#[test]
fn draws_with_replacement_are_endless_and_seeded() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built(dir.path(), 0)).unwrap();
    let rows = ds.rows().len();
    let replay = ReplayOptions::new().replacement(true);
    // Twice the dataset's rows and more: `epochs(1)` does not end the draws.
    let batches = 2 * rows / 32 + 2;
    let take = |seed: u64, threads: u32| {
        let mut f = Feed::open_replay(&ds, &replay, None, &opts(32).seed(seed).threads(threads).epochs(1)).unwrap();
        let got: Vec<Vec<usize>> =
            (0..batches).map(|_| f.next_batch().unwrap().unwrap().indices().unwrap().to_vec()).collect();
        assert!(!f.ended());
        assert_eq!(f.stats().batches_per_epoch, 0);
        got
    };
    let first = take(1, 1);
    assert!(first.iter().flatten().all(|&i| i < rows));
    assert_eq!(first, take(1, 1));
    assert_eq!(first, take(1, 2));
    assert_ne!(first, take(2, 1));
}

#[test]
fn recent_reads_only_the_newest_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built(dir.path(), 0)).unwrap();
    let (rows, k) = (ds.rows().len(), 100);
    let mut f =
        Feed::open_replay(&ds, &ReplayOptions::new().replacement(true).recent(k as u64), None, &opts(32)).unwrap();
    for _ in 0..10 {
        assert!(f.next_batch().unwrap().unwrap().indices().unwrap().iter().all(|&i| i >= rows - k));
    }
    let windows = ReplayOptions::new().window(8).recent(k as u64);
    let f = Feed::open_replay(&ds, &windows, None, &opts(16).epochs(1)).unwrap();
    let mut seen = 0;
    for b in f {
        let b = b.unwrap();
        assert!(b.indices().unwrap().iter().all(|&i| i >= rows - k));
        seen += b.windows();
    }
    assert!(seen > 0);
}

#[test]
fn prioritized_draws_skip_zero_priorities_and_carry_weights() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::open(built(dir.path(), 0)).unwrap();
    let n = ds.rows().len() as u64;
    let pr = Priorities::new(n, 0.6, 0.4, 1.0).unwrap();
    assert!(pr.bytes() >= 4 * n); // the values at least
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
    let stream = ShardStream::open(&ds_dir, &ShardStreamOptions::new().budget_bytes(1 << 20)).unwrap();
    assert!(stream.info().unwrap().shards >= 4);
    let shards = ShardFeedOptions::new().budget_bytes(1 << 20).window(2).verify_crc(true).huge_pages(false);
    let f = Feed::open_shards(&ds_dir, &shards, &opts(32).epochs(2)).unwrap();
    assert_eq!(f.window(), 1);
    let mut epochs = vec![Vec::new(), Vec::new()];
    for b in f {
        let b = b.unwrap();
        epochs[b.info().epoch as usize].extend_from_slice(b.indices().unwrap());
    }
    assert_ne!(epochs[0], epochs[1]); // shuffled again each epoch
    for mut seen in epochs {
        seen.sort_unstable();
        assert_eq!(seen, (0..rows).collect::<Vec<_>>());
    }
    let err = Feed::open_shards(&ds_dir, &ShardFeedOptions::new().budget_bytes(1000), &opts(32)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("budget"), "{err}");
}

#[test]
fn a_live_feed_takes_in_appended_rows_and_resumes_over_more() {
    let dir = tempfile::tempdir().unwrap();
    let out = built(dir.path(), 0);
    let ds = Dataset::open(&out).unwrap();
    let n = ds.info().rows as usize;
    let live = opts(256).live(true);
    let replay = ReplayOptions::new().replacement(true);
    let mut f = Feed::open_replay(&ds, &replay, None, &live).unwrap();
    for _ in 0..3 {
        assert!(f.next_batch().unwrap().unwrap().indices().unwrap().iter().all(|&i| i < n));
    }
    let state = f.state().unwrap();
    let more = dir.path().join("more");
    common::gen_runs(&more, 6, 900);
    let r = dataset::append(&out, &more, &BuildOptions::new().workers(1), None).unwrap();
    assert_eq!(f.refresh().unwrap(), r.total_rows);
    let after: Vec<Vec<usize>> = (0..3).map(|_| f.next_batch().unwrap().unwrap().indices().unwrap().to_vec()).collect();
    assert!(after.iter().flatten().any(|&i| i >= n));
    // A state taken over n rows resumes over the grown dataset: new rows from its position on.
    let grown = Dataset::open(&out).unwrap();
    let mut g = Feed::open_replay(&grown, &replay, None, &live).unwrap();
    g.load_state(&state).unwrap();
    let resumed: Vec<Vec<usize>> =
        (0..3).map(|_| g.next_batch().unwrap().unwrap().indices().unwrap().to_vec()).collect();
    assert_eq!(resumed, after);
    // Refusals: refresh of a feed that is not live, a rate limit without live.
    let mut plain = Feed::open_replay(&grown, &replay, None, &opts(256)).unwrap();
    assert_eq!(plain.refresh().unwrap_err().status(), Status::InvalidArgument);
    let limited = opts(256).rate_limit(2.0, 0, Some(std::time::Duration::from_millis(10)));
    let err = Feed::open_replay(&grown, &replay, None, &limited).unwrap_err();
    assert!(err.to_string().contains("open the feed with live"), "{err}");
}

#[test]
fn a_live_sharded_feed_takes_appended_shards_in_at_the_next_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let ds_dir = built(dir.path(), 100);
    let n = Dataset::open(&ds_dir).unwrap().rows().len();
    let shards = ShardFeedOptions::new().budget_bytes(1 << 20).window(2);
    let live = opts(32).live(true);
    let mut f = Feed::open_shards(&ds_dir, &shards, &live).unwrap();
    let per_epoch = f.stats().batches_per_epoch;
    let mut epoch0: Vec<usize> = f.next_batch().unwrap().unwrap().indices().unwrap().to_vec();
    let state = f.state().unwrap();
    let more = dir.path().join("more");
    common::gen_runs(&more, 6, 900);
    let r = dataset::append(&ds_dir, &more, &BuildOptions::new().workers(1), None).unwrap();
    assert_eq!(f.refresh().unwrap() as usize, r.total_rows as usize);
    let mut rest = Vec::new();
    let mut epoch1 = Vec::new();
    while epoch1.len() < r.total_rows as usize {
        let b = f.next_batch().unwrap().unwrap();
        let idx = b.indices().unwrap().to_vec();
        match b.info().epoch {
            0 => {
                epoch0.extend_from_slice(&idx);
                rest.push(idx);
            }
            1 => epoch1.extend_from_slice(&idx),
            e => panic!("epoch {e} before epoch 1 held every row"),
        }
    }
    assert_eq!(rest.len() as u64, per_epoch - 1);
    epoch0.sort_unstable();
    assert_eq!(epoch0, (0..n).collect::<Vec<_>>()); // the epoch begun keeps its shards
    epoch1.sort_unstable();
    assert_eq!(epoch1, (0..r.total_rows as usize).collect::<Vec<_>>());
    // The state taken over n rows resumes over the grown shards.
    let mut g = Feed::open_shards(&ds_dir, &shards, &live).unwrap();
    g.load_state(&state).unwrap();
    for want in &rest {
        assert_eq!(g.next_batch().unwrap().unwrap().indices().unwrap(), &want[..]);
    }
}

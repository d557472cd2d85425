//! The feed: batches come in the sampler's order, each equals a gather of
//! its rows, checkpoints round-trip, ranks split each global batch, and bad
//! options, absent columns, damaged states and a full ring are errors.

mod common;

use a2pack::{
    dataset, BuildOptions, ColumnsMut, Dataset, Feed, FeedColumn, FeedOptions, Mix, MixSource, Moves, MovesDtype, Pin,
    Sampler, Status,
};

fn built(dir: &std::path::Path) -> Dataset {
    let runs = dir.join("runs");
    common::gen_runs(&runs, 6, 31);
    let out = dir.join("ds");
    dataset::build(&runs, &out, &BuildOptions::new().workers(1), None).unwrap();
    Dataset::open(&out).unwrap()
}

const BATCH: u64 = 37;

// The order these tests compare with is the Sampler's: the stored permutation.
fn opts() -> FeedOptions {
    FeedOptions::new().batch_size(BATCH).seed(11).pin(Pin::Off).stored_permutation()
}

/// Every batch's indices until the end.
fn all_indices(feed: &mut Feed) -> Vec<(u64, u64, Vec<usize>)> {
    feed.by_ref()
        .map(|b| {
            let b = b.unwrap();
            (b.info().epoch, b.info().batch, b.indices().unwrap().to_vec())
        })
        .collect()
}

#[test]
fn order_equals_the_samplers_for_any_threads_and_depth() {
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    let n = ds.rows().len();
    let mut sampler = Sampler::new(None, n, 11, BATCH as usize, false).unwrap();
    let mut want = Vec::new();
    for epoch in 0..3 {
        sampler.set_epoch(epoch).unwrap();
        want.extend(sampler.by_ref().enumerate().map(|(b, idx)| (epoch, b as u64, idx)));
    }
    for (threads, depth) in [(1, 0), (1, 1), (2, 4), (3, 8)] {
        let mut feed = Feed::open(&ds, None, &opts().threads(threads).depth(depth).epochs(3)).unwrap();
        assert_eq!(all_indices(&mut feed), want, "threads {threads} depth {depth}");
        assert!(feed.ended());
        assert!(feed.next_batch().unwrap().is_none(), "the end stays the end");
        let stats = feed.stats();
        // Depth 0 gathers inside next(), with no producer thread.
        let producers = if depth == 0 { 0 } else { threads };
        assert_eq!((stats.batches_served as usize, stats.threads, stats.depth), (want.len(), producers, depth));
        assert_eq!(stats.rows_served as usize, 3 * n);
        assert_eq!(stats.seed, 11);
    }
    // The default order (the index shuffle): every row once an epoch, reshuffled.
    let mut feed = Feed::open(&ds, None, &FeedOptions::new().batch_size(BATCH).pin(Pin::Off).epochs(2)).unwrap();
    let got = all_indices(&mut feed);
    let mut epochs = [Vec::new(), Vec::new()];
    for (e, _, idx) in got {
        epochs[e as usize].extend(idx);
    }
    assert_ne!(epochs[0], epochs[1]);
    for e in epochs.iter_mut() {
        e.sort_unstable();
        assert_eq!(*e, (0..n).collect::<Vec<_>>());
    }
    // A subset of rows, in the given order without shuffling.
    let subset: Vec<usize> = (0..n).rev().step_by(3).collect();
    let mut feed = Feed::open(&ds, Some(&subset), &opts().shuffle(false).epochs(1)).unwrap();
    let got: Vec<usize> = all_indices(&mut feed).into_iter().flat_map(|(_, _, i)| i).collect();
    assert_eq!(got, subset);
}

#[test]
fn column_names_come_from_the_librarys_table() {
    let names: Vec<&str> = FeedColumn::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        [
            "exponents", "moves", "legal", "ev_values", "boards", "run_ids", "step_indices", "legal_mask",
            "indices", "valid", "weights"
        ]
    );
}

#[test]
fn a_batch_equals_a_gather_of_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    // Every column a row has (the rest, from Indices on, the feed adds).
    let every = &FeedColumn::ALL[..8];
    for dtype in [MovesDtype::U8, MovesDtype::I32, MovesDtype::I64] {
        let feed = Feed::open(&ds, None, &opts().threads(2).columns(every).moves_dtype(dtype).epochs(1)).unwrap();
        for batch in feed {
            let batch = batch.unwrap();
            let idx = batch.indices().unwrap();
            let n = idx.len();
            assert_eq!(n, batch.len());
            let (mut exps, mut boards, mut moves) = (vec![0u8; n * 16], vec![0u64; n], vec![0u8; n]);
            let (mut legal, mut mask, mut values) = (vec![0u8; n * 4], vec![0u8; n], vec![0f32; n * 4]);
            let (mut runs, mut steps) = (vec![0u32; n], vec![0u16; n]);
            let mut cols = ColumnsMut {
                exponents: Some(&mut exps),
                boards: Some(&mut boards),
                moves: Some(&mut moves),
                legal: Some(&mut legal),
                legal_mask: Some(&mut mask),
                ev_values: Some(&mut values),
                run_ids: Some(&mut runs),
                step_indices: Some(&mut steps),
            };
            ds.gather_columns(idx, &mut cols, 1).unwrap();
            assert_eq!(batch.exponents().unwrap(), &exps[..]);
            assert_eq!(batch.boards().unwrap(), &boards[..]);
            assert_eq!(batch.legal().unwrap(), &legal[..]);
            assert_eq!(batch.legal_mask().unwrap(), &mask[..]);
            assert_eq!(batch.ev_values().unwrap(), &values[..]);
            assert_eq!(batch.run_ids().unwrap(), &runs[..]);
            assert_eq!(batch.step_indices().unwrap(), &steps[..]);
            let m = batch.moves().unwrap();
            match (dtype, m) {
                (MovesDtype::U8, Moves::U8(_))
                | (MovesDtype::I32, Moves::I32(_))
                | (MovesDtype::I64, Moves::I64(_)) => {}
                other => panic!("moves in the wrong type: {other:?}"),
            }
            assert_eq!((0..m.len()).map(|i| m.get(i).unwrap()).collect::<Vec<u8>>(), moves);
        }
    }
    // A column the feed was opened without is an error naming it.
    let mut feed = Feed::open(&ds, None, &opts().columns(&[FeedColumn::Moves]).epochs(1)).unwrap();
    let batch = feed.next().unwrap().unwrap();
    assert_eq!(batch.exponents().unwrap_err().status(), Status::NotFound);
    assert!(matches!(batch.moves().unwrap(), Moves::U8(_)));
}

#[test]
fn state_round_trips_and_bad_states_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    let o = opts().threads(2).depth(3).epochs(3);
    let mut feed = Feed::open(&ds, None, &o).unwrap();
    let per_epoch = feed.stats().batches_per_epoch as usize;
    // Stop just before an epoch boundary, so the rest crosses it.
    for _ in 0..per_epoch - 1 {
        feed.next().unwrap().unwrap();
    }
    let state = feed.state().unwrap();
    let rest = all_indices(&mut feed);
    assert_eq!(rest.len(), 2 * per_epoch + 1);

    let mut again = Feed::open(&ds, None, &o).unwrap();
    again.next().unwrap().unwrap(); // somewhere else first
    again.load_state(&state).unwrap();
    assert_eq!(all_indices(&mut again), rest, "the batches after the checkpoint, again");

    // Damaged, truncated or foreign states change nothing.
    let mut other = Feed::open(&ds, None, &o).unwrap();
    let mut damaged = state.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x55;
    assert!(other.load_state(&damaged).is_err());
    let err = other.load_state(&state[..state.len() / 2]).unwrap_err();
    assert!(!err.message().is_empty(), "{err}");
    let mut bigger = Feed::open(&ds, None, &o.batch_size(BATCH + 1)).unwrap();
    let err = bigger.load_state(&state).unwrap_err();
    assert!(err.message().contains("batch"), "{err}");
    let first = other.next().unwrap().unwrap();
    assert_eq!((first.info().epoch, first.info().batch), (0, 0), "a refused state left the feed at its start");
}

#[test]
fn ranks_split_each_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    let whole = all_indices(&mut Feed::open(&ds, None, &opts().epochs(1)).unwrap());
    let parts: Vec<_> =
        (0..3).map(|r| all_indices(&mut Feed::open(&ds, None, &opts().rank(r, 3).epochs(1)).unwrap())).collect();
    for (b, (_, _, idx)) in whole.iter().enumerate() {
        let joined: Vec<usize> = parts.iter().flat_map(|p| p[b].2.clone()).collect();
        assert_eq!(&joined, idx, "batch {b}");
    }
}

#[test]
fn bad_options_a_full_ring_and_batches_past_close() {
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    let err = Feed::open(&ds, None, &opts().batch_size(0)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    let err = Feed::open(&ds, None, &opts().rank(2, 2)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    let err = Feed::open(&ds, Some(&[0, ds.rows().len()]), &opts()).unwrap_err();
    assert_eq!(err.status(), Status::OutOfRange);
    assert!(err.message().contains(&ds.rows().len().to_string()), "{err}");

    // Holding every slot: next() says so instead of waiting for ever.
    let mut feed = Feed::open(&ds, None, &opts().depth(1).slots(2)).unwrap();
    let held: Vec<_> = (0..2).map(|_| feed.next().unwrap().unwrap()).collect();
    assert_eq!(feed.next().unwrap().unwrap_err().status(), Status::Full);
    // Batches (and clones) stay valid after the feed is closed.
    let copy = held[1].clone();
    let want = held[1].indices().unwrap().to_vec();
    drop(feed);
    drop(held);
    assert_eq!(copy.indices().unwrap(), &want[..]);
    assert_eq!(copy.exponents().unwrap().len(), want.len() * 16);
}

#[test]
fn a_feed_over_a_mix_follows_it_resumes_and_reweights() {
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    let n = ds.rows().len();
    let old: Vec<usize> = (0..n / 3).collect();
    let new: Vec<usize> = (n / 3..n).collect();
    let sources = [MixSource::Rows(&old), MixSource::Rows(&new)];
    let mut mix = Mix::new(&sources, &[1.0, 3.0], 5, 40).unwrap();
    let mut feed = Feed::open_mix(&ds, &mix, &opts().threads(2)).unwrap();
    assert_eq!(feed.stats().batches_per_epoch, 0);
    for k in 0..30u64 {
        let b = feed.next().unwrap().unwrap();
        assert_eq!((b.info().epoch, b.info().batch), (0, k));
        assert_eq!(b.indices().unwrap().to_vec(), mix.part(k, 0, 1).unwrap().rows);
    }
    let state = feed.state().unwrap();
    let want: Vec<Vec<usize>> = (0..4).map(|_| feed.next().unwrap().unwrap().indices().unwrap().to_vec()).collect();
    let other = Mix::new(&sources, &[1.0, 1.0], 77, 40).unwrap();
    let mut resumed = Feed::open_mix(&ds, &other, &opts()).unwrap();
    resumed.load_state(&state).unwrap();
    let got: Vec<Vec<usize>> = (0..4).map(|_| resumed.next().unwrap().unwrap().indices().unwrap().to_vec()).collect();
    assert_eq!(got, want);
    resumed.set_weights(&[0.0, 1.0]).unwrap();
    let b = resumed.next().unwrap().unwrap();
    assert!(b.indices().unwrap().iter().all(|&i| i >= n / 3));
    assert_eq!(resumed.set_weights(&[1.0]).unwrap_err().status(), Status::InvalidArgument);
    let mut plain = Feed::open(&ds, None, &opts()).unwrap();
    assert_eq!(plain.set_weights(&[1.0, 1.0]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(plain.load_state(&state).unwrap_err().status(), Status::InvalidArgument);
    // Rows outside the dataset are refused at open.
    let far = [n];
    mix = Mix::new(&[MixSource::Rows(&far)], &[1.0], 0, 4).unwrap();
    assert_eq!(Feed::open_mix(&ds, &mix, &opts()).unwrap_err().status(), Status::OutOfRange);
}

#[test]
fn producers_spare_a_slow_consumers_cpu_unless_told_not_to() {
    // (Which CPU is spared depends on where the scheduler runs this thread:
    // the C and Python suites pin the consumer and check it. Here: the
    // option reaches the library, and batches stay right either way.)
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    for spare in [true, false] {
        let mut feed = Feed::open(&ds, None, &opts().depth(2).spare_consumer_cpu(spare)).unwrap();
        // A slow consumer: a 2 ms training step after each batch.
        for _ in 0..24 {
            let b = feed.next().unwrap().unwrap();
            let idx = b.indices().unwrap();
            assert!(!idx.is_empty() && idx.len() as u64 <= BATCH);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if !spare {
            assert_eq!(feed.stats().spared_cpu, None);
        }
    }
}

#[test]
fn dlpack_columns_view_the_batch_and_hold_its_slot_until_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let ds = built(dir.path());
    let cols = [FeedColumn::Exponents, FeedColumn::Boards, FeedColumn::Indices];
    let mut feed = Feed::open(&ds, None, &opts().columns(&cols[..2]).depth(1)).unwrap();
    let batch = feed.next().unwrap().unwrap();
    let tensors = batch.dlpack(&cols).unwrap();
    assert_eq!(tensors[0].shape(), [BATCH as i64, 16]);
    assert_eq!(tensors[1].shape(), [BATCH as i64]);
    assert_eq!(tensors[0].tensor().data as *const u8, batch.exponents().unwrap().as_ptr());
    assert_eq!(tensors[2].tensor().data as *const usize, batch.indices().unwrap().as_ptr());
    assert_eq!(batch.dlpack(&[FeedColumn::RunIds]).unwrap_err().status(), Status::NotFound);
    let boards = batch.boards().unwrap().to_vec();
    drop(batch);
    // The tensors keep the slot, and its rows, without the batch.
    assert_eq!(feed.stats().held, 1);
    let t = &tensors[1];
    // SAFETY: the tensor's BATCH u64 values, held by it.
    let seen = unsafe { std::slice::from_raw_parts(t.tensor().data as *const u64, BATCH as usize) };
    assert_eq!(seen, &boards[..]);
    let raw = tensors.into_iter().map(|t| t.into_raw()).collect::<Vec<_>>();
    assert_eq!(feed.stats().held, 1);
    for t in raw {
        // SAFETY: each tensor's deleter, once, as a framework would.
        unsafe { ((*t).deleter.unwrap())(t) };
    }
    assert_eq!(feed.stats().held, 0);
}

//! Sharded datasets from Rust: a sharded build streams every row once an
//! epoch within its budget, equal to the dataset's own rows; a saved state
//! resumes exactly; what cannot work is a clear error.

mod common;

use a2pack::{dataset, BuildOptions, ColumnsMut, Dataset, ShardStream, ShardStreamOptions, Status};

fn built(dir: &std::path::Path) -> std::path::PathBuf {
    let runs = dir.join("runs");
    common::gen_runs(&runs, 12, 5);
    let out = dir.join("ds");
    dataset::build(&runs, &out, &BuildOptions::new().workers(1).shard_rows(100), None).unwrap();
    out
}

fn opts() -> ShardStreamOptions {
    ShardStreamOptions::new().batch_size(32).budget_bytes(1 << 20).seed(4)
}

#[test]
fn an_epoch_streams_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let ds_dir = built(dir.path());
    let ds = Dataset::open(&ds_dir).unwrap();
    let mut s = ShardStream::open(&ds_dir, &opts()).unwrap();
    let info = s.info().unwrap();
    assert!(info.shards > 1);
    let (mut run_ids, mut idx) = (vec![0u32; 32], vec![0i64; 32]);
    let mut seen = Vec::new();
    loop {
        let n = {
            let mut cols = ColumnsMut { run_ids: Some(&mut run_ids), ..Default::default() };
            s.next_batch(&mut cols, Some(&mut idx)).unwrap()
        };
        if n == 0 {
            break;
        }
        for k in 0..n {
            assert_eq!(run_ids[k], ds.rows()[idx[k] as usize].run_id());
            seen.push(idx[k]);
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..info.rows as i64).collect::<Vec<_>>());
    assert_eq!(s.info().unwrap().epoch, 1);
    assert!(s.stats().unwrap().loads >= info.shards);
}

#[test]
fn a_state_resumes_exactly_and_bad_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ds_dir = built(dir.path());
    let mut s = ShardStream::open(&ds_dir, &opts()).unwrap();
    let mut idx = vec![0i64; 32];
    for _ in 0..3 {
        s.next_batch(&mut ColumnsMut::default(), Some(&mut idx)).unwrap();
    }
    let state = s.save_state().unwrap();
    let n = s.next_batch(&mut ColumnsMut::default(), Some(&mut idx)).unwrap();
    let mut r = ShardStream::open(&ds_dir, &opts()).unwrap();
    r.load_state(&state).unwrap();
    let mut again = vec![0i64; 32];
    assert_eq!(r.next_batch(&mut ColumnsMut::default(), Some(&mut again)).unwrap(), n);
    assert_eq!(again[..n], idx[..n]);
    assert_eq!(r.batch_indices(3).unwrap(), idx[..n].to_vec());
    let other = ShardStream::open(&ds_dir, &opts().seed(5));
    assert_eq!(other.unwrap().load_state(&state).unwrap_err().status(), Status::InvalidArgument);
    let small = ShardStream::open(&ds_dir, &opts().budget_bytes(100));
    assert_eq!(small.err().unwrap().status(), Status::InvalidArgument);
    let mut short = vec![0u8; 3];
    let err = s.next_batch(&mut ColumnsMut { moves: Some(&mut short), ..Default::default() }, None);
    assert_eq!(err.unwrap_err().status(), Status::InvalidArgument);
}

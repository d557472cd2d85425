//! Arrow exports: every capability's record batches and streams hold the
//! values the other calls return, and outlive the handles they came from.

mod common;

use a2pack::arrow::Layout;
use a2pack::{dataset, BuildOptions, Dataset, Pack, PackWriterOptions, ReadFlags, RunBatch, Status};

fn column<'a, T: Copy>(rb: &'a a2pack::arrow::RecordBatch, name: &str) -> &'a [T] {
    let i = rb.schema.field_names().iter().position(|n| n == name).unwrap_or_else(|| panic!("no column {name}"));
    // SAFETY: the tests name columns of the type the header documents.
    unsafe { rb.array.column::<T>(i) }.unwrap()
}

#[test]
fn runs_packs_and_datasets_export_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    common::gen_runs(&runs, 5, 4);
    let path = dir.path().join("p.a2pack");
    a2pack::pack_dir(&runs, &path, PackWriterOptions::new(), None).unwrap();
    let pack = Pack::open(&path).unwrap();

    let batch = pack.decode_batch(&[4, 1], 1).unwrap();
    let (boards, finals) = (batch.columns().boards.to_vec(), batch.columns().final_boards.to_vec());
    let steps = batch.to_arrow(Layout::Steps).unwrap();
    let per_run = batch.to_arrow(Layout::Runs).unwrap();
    drop(batch);
    assert_eq!(steps.schema.format(), "+s");
    assert_eq!(column::<u64>(&steps, "board"), &boards[..]);
    assert_eq!(column::<u64>(&per_run, "final_board"), &finals[..]);

    let entries = pack.arrow_entries().unwrap();
    assert_eq!(entries.array.len(), 5);
    assert_eq!(column::<u64>(&entries, "offset")[3], pack.entry(3).unwrap().offset);
    let (stats, hist) = pack.arrow_stats(1).unwrap();
    assert_eq!(column::<u64>(&stats, "total_steps"), &[pack.stats(1).unwrap().total_steps]);
    assert_eq!(column::<u64>(&hist, "runs").iter().sum::<u64>(), 5);

    let mut stream = pack.arrow_stream(Layout::Runs, None, 2, 1, ReadFlags::DEFAULT).unwrap();
    assert!(stream.schema().unwrap().field_names().contains(&"entry".to_string()));
    drop(pack);
    let lens: Vec<usize> = stream.by_ref().map(|a| a.unwrap().len()).collect();
    assert_eq!(lens, vec![2, 2, 1]);

    let ds_dir = dir.path().join("ds");
    dataset::build(&runs, &ds_dir, &BuildOptions::new(), None).unwrap();
    let ds = Dataset::open(&ds_dir).unwrap();
    let rb = ds.to_arrow(&[2, 0], 1).unwrap();
    assert_eq!(column::<u64>(&rb, "board"), &[ds.rows()[2].board(), ds.rows()[0].board()]);
    assert_eq!(ds.to_arrow(&[ds.rows().len()], 1).unwrap_err().status(), Status::OutOfRange);
    let rows = ds.info().rows as usize;
    let stream = ds.arrow_stream(None, 100, 1).unwrap();
    drop(ds);
    assert_eq!(stream.map(|a| a.unwrap().len()).sum::<usize>(), rows);

    let fixture = std::fs::read(common::fixture()).unwrap();
    let rb = RunBatch::decode(&[&fixture], 1).unwrap().to_arrow(Layout::Runs).unwrap();
    assert_eq!(column::<u64>(&rb, "max_score"), &[20504]);
}

#[test]
fn bag_batches_and_logs_export() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.bagz");
    let mut w = a2pack::bag::Writer::create(&path, &Default::default()).unwrap();
    w.write_all([&b"a"[..], b"bc", b""]).unwrap();
    w.commit().unwrap();
    let r = a2pack::bag::Reader::open(&path).unwrap();
    let rb = r.read_range(0, 3, 1).unwrap().into_arrow().unwrap();
    drop(r);
    assert_eq!(rb.schema.field_names(), ["record"]);
    assert_eq!(rb.schema.field_format(0).as_deref(), Some("Z")); // large_binary
    assert_eq!(rb.array.len(), 3);

    let log_dir = dir.path().join("log");
    let log = a2pack::DataLogger::open(&log_dir).unwrap();
    let s = log.register_stream("{}", 1.0, 1.0, false).unwrap();
    log.record(s, 5.0, &[1, 2], &[3.0, 4.0]).unwrap();
    log.close().unwrap();
    let rb = a2pack::logger::decode(&log_dir).unwrap().to_arrow().unwrap();
    assert_eq!(column::<f64>(&rb, "epoch"), &[5.0]);
    // Handed over raw, the receiver releases it (here: by hand).
    let mut raw = rb.array.into_raw();
    unsafe { raw.release.unwrap()(&mut raw) };
    assert!(raw.release.is_none(), "the spec's release marks the struct released");
}

//! The data logger: a folder written from Rust decodes in Python; batches,
//! threads, bad records.

mod common;

use a2pack::logger::{self, RecordBatch};
use a2pack::{DataLogger, LoggerOptions, Status};

fn write_folder(dir: &std::path::Path) {
    let log = DataLogger::open_with(dir, &LoggerOptions::new().flush_interval_ms(0)).unwrap();
    let a = log.register_stream(r#"{"entity":"rust","measure":"a"}"#, 1e-3, 1e-6, false).unwrap();
    let b = log.register_stream(r#"{"entity":"rust","measure":"b"}"#, 1.0, 0.5, true).unwrap();
    log.record(a, 0.25, &[1, 4, 9], &[0.5, -1.25, 3.0]).unwrap();
    log.record(b, 2.0, &[7, 3], &[1.0, 2.5]).unwrap(); // sorted by the stream
    log.record(a, 0.5, &[], &[]).unwrap();
    log.record_batch(&RecordBatch {
        stream_ids: &[a.0, b.0],
        epochs: &[1.0, 3.0],
        offsets: &[0, 2, 3],
        indices: &[0, 2, 5],
        values: &[1e-6, 2e-6, 4.5],
    })
    .unwrap();
    log.flush().unwrap();
    assert_eq!(log.stats().unwrap().records, 5);
    log.close().unwrap();
}

#[test]
fn folder_written_from_rust_decodes_in_rust_and_python() {
    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path());
    let data = logger::decode(dir.path()).unwrap();
    let c = data.columns();
    assert_eq!(c.stream_ids, &[0, 1, 0, 0, 1]);
    assert_eq!(c.epochs, &[0.25, 2.0, 0.5, 1.0, 3.0]);
    assert_eq!(c.offsets, &[0, 3, 5, 5, 7, 8]);
    assert_eq!(c.indices, &[1, 4, 9, 3, 7, 0, 2, 5]);
    assert_eq!(c.values, &[0.5, -1.25, 3.0, 2.5, 1.0, 1e-6, 2e-6, 4.5]);
    let streams = data.streams().unwrap();
    assert_eq!(streams.len(), 2);
    assert!(streams[1].sort && !streams[0].sort);
    assert_eq!(streams[0].labels_json, r#"{"entity":"rust","measure":"a"}"#);
    assert!(data.problems().unwrap().is_empty());

    let Some(py) = common::python() else { return };
    let script = "import sys, json, a2pack\n\
                  d = a2pack.logger.decode(sys.argv[1])\n\
                  for sid, epoch, idx, val in d:\n    print(sid, repr(float(epoch)), idx.tolist(), [float(v) for v in val])\n\
                  print(json.load(open(sys.argv[1] + '/streams/1.json'))['labels'])";
    let out = common::python_script(&py, script, &[dir.path()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..5],
        [
            "0 0.25 [1, 4, 9] [0.5, -1.25, 3.0]",
            "1 2.0 [3, 7] [2.5, 1.0]",
            "0 0.5 [] []",
            "0 1.0 [0, 2] [1e-06, 2e-06]",
            "1 3.0 [5] [4.5]",
        ]
    );
    assert_eq!(lines[5], "{'entity': 'rust', 'measure': 'b'}");
}

#[test]
fn bad_records_are_refused_and_keep_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = DataLogger::open(dir.path()).unwrap();
    let s = log.register_stream("{}", 1.0, 1.0, false).unwrap();
    let err = log.record(s, 0.0, &[3, 1], &[1.0, 2.0]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(!err.message().is_empty());
    assert_eq!(log.record(s, f64::NAN, &[], &[]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(log.record(a2pack::StreamId(99), 0.0, &[], &[]).unwrap_err().status(), Status::InvalidArgument);
    let err = log
        .record_batch(&RecordBatch {
            stream_ids: &[s.0, s.0, s.0],
            epochs: &[0.0, 1.0, 2.0],
            offsets: &[0, 1, 1, 3],
            indices: &[1, 5, 5],
            values: &[1.0, 2.0, 3.0],
        })
        .unwrap_err();
    assert_eq!(err.accepted(), Some(2));
    assert!(err.message().contains("record 2"), "{err}");
    // A second logger on the same folder is refused.
    assert!(DataLogger::open(dir.path()).is_err());
    log.finish().unwrap();
    assert_eq!(log.record(s, 0.0, &[], &[]).unwrap_err().status(), Status::Closed);
    drop(log);
    assert_eq!(logger::decode(dir.path()).unwrap().columns().epochs, &[0.0, 1.0]);
    assert_eq!(logger::decode(dir.path().join("none")).unwrap_err().status(), Status::NotFound);
}

#[test]
fn many_threads_record_into_one_logger() {
    let dir = tempfile::tempdir().unwrap();
    let log = DataLogger::open(dir.path()).unwrap();
    let s = log.register_stream("{}", 1.0, 1.0, false).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let log = &log;
            scope.spawn(move || {
                for i in 0..250u32 {
                    log.record(s, f64::from(i), &[t], &[f64::from(t)]).unwrap();
                }
            });
        }
    });
    log.close().unwrap();
    let data = logger::decode(dir.path()).unwrap();
    assert_eq!(data.summary().records, 1000);
    let c = data.columns();
    for t in 0..4u32 {
        // One thread's records keep their order.
        let epochs: Vec<f64> = (0..1000).filter(|&r| c.indices[r] == t).map(|r| c.epochs[r]).collect();
        assert_eq!(epochs, (0..250).map(f64::from).collect::<Vec<_>>());
    }
}

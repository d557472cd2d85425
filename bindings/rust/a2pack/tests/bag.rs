//! Record files: a .bagz written from Rust reads in Python's `bagz`; the
//! reader, index and two-step reads; bad input.

mod common;

use a2pack::bag::{Index, LimitsPlacement, MultiIndex, Reader, ReaderOptions, Writer, WriterOptions};
use a2pack::Status;

fn records() -> Vec<Vec<u8>> {
    (0..300u32).map(|i| format!("record-{i}-").repeat((i % 7) as usize).into_bytes()).collect()
}

#[test]
fn bagz_written_from_rust_reads_in_python_bagz() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("from-rust.bagz");
    let mut w = Writer::create(&path, &WriterOptions::new().workers(2)).unwrap();
    let recs = records();
    w.write(&recs[0]).unwrap();
    w.write_all(&recs[1..]).unwrap();
    assert_eq!(w.count(), 300);
    assert!(!path.exists(), "nothing appears before commit");
    w.commit().unwrap();
    drop(w);

    let r = Reader::open(&path).unwrap();
    assert_eq!(r.len(), 300);
    assert!(r.shard_info(0).unwrap().compressed);
    for (i, rec) in r.iter_with(64).enumerate() {
        assert_eq!(rec.unwrap(), recs[i]);
    }

    let Some(py) = common::python() else { return };
    let script = "import sys, bagz, hashlib\n\
                  r = bagz.Reader(sys.argv[1])\n\
                  print(len(r))\n\
                  for i in range(len(r)):\n    print(hashlib.sha256(r[i]).hexdigest())";
    let out = common::python_script(&py, script, &[&path]);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("300"));
    for (i, line) in lines.enumerate() {
        let mut want = String::new();
        for b in sha256(&recs[i]) {
            want.push_str(&format!("{b:02x}"));
        }
        assert_eq!(line, want, "record {i} as bagz reads it");
    }
}

/// SHA-256, to compare records with Python's hashlib without shipping the
/// bytes through a pipe. Hand-written because it is 40 lines and a test-only
/// dependency for it would be the only one.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(chunk[i * 4..i * 4 + 4].try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        for i in 0..8 {
            h[i] = h[i].wrapping_add(v[i]);
        }
    }
    let mut out = [0u8; 32];
    for i in 0..8 {
        out[i * 4..i * 4 + 4].copy_from_slice(&h[i].to_be_bytes());
    }
    out
}

#[test]
fn bag_written_by_python_reads_in_rust() {
    let Some(py) = common::python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("from-python.bagz");
    let script = "import sys, bagz\n\
                  with bagz.Writer(sys.argv[1]) as w:\n    for i in range(50):\n        w.write(b'py-%d' % i * (i % 4))";
    common::python_script(&py, script, &[&path]);
    let r = Reader::open(&path).unwrap();
    assert_eq!(r.len(), 50);
    let batch = r.read(&[49, 3, 3], 0).unwrap();
    let got: Vec<&[u8]> = batch.iter().collect();
    assert_eq!(got, vec![b"py-49".as_slice(), b"py-3py-3py-3", b"py-3py-3py-3"]);
}

#[test]
fn reader_views_index_and_pending_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.bag");
    let recs = records();
    let mut w = Writer::create(&path, &WriterOptions::new().limits_placement(LimitsPlacement::Separate)).unwrap();
    w.write_all(&recs).unwrap();
    w.commit().unwrap();
    assert!(dir.path().join("limits.plain.bag").exists());

    let r = Reader::open_with(&path, &ReaderOptions::new().limits_placement(LimitsPlacement::Separate)).unwrap();
    let map = r.shard_map(0).unwrap();
    for (k, (shard, b, e)) in r.spans(&[5, 0, 299]).unwrap().into_iter().enumerate() {
        assert_eq!(shard, 0);
        assert_eq!(&map[b as usize..e as usize], &recs[[5, 0, 299][k]][..]);
    }
    assert_eq!(r.spans_range(5, 1).unwrap(), r.spans(&[5]).unwrap());
    let sizes = r.sizes(&[3, 0, 10], 1).unwrap();
    assert_eq!(sizes, vec![recs[3].len() as u64, recs[0].len() as u64, recs[10].len() as u64]);
    assert_eq!(r.sizes(&[300], 1).unwrap_err().status(), Status::OutOfRange);
    assert_eq!(r.notes(), "");
    let range = r.read_range(10, 5, 1).unwrap();
    assert_eq!(range.len(), 5);
    assert_eq!(range.get(4).unwrap(), &recs[14][..]);

    let mut p = r.prepare(&[7, 8], 1).unwrap();
    let mut bufs: Vec<Vec<u8>> = p.sizes().iter().map(|&n| vec![0; n as usize]).collect();
    p.fill(&mut bufs).unwrap();
    assert_eq!(bufs, vec![recs[7].clone(), recs[8].clone()]);
    let mut wrong = vec![vec![0u8; 1]; 2];
    assert_eq!(p.fill(&mut wrong).unwrap_err().status(), Status::InvalidArgument);

    let multi = MultiIndex::build(&r, None, 2).unwrap();
    assert_eq!(multi.get(b""), (0..300).step_by(7).collect::<Vec<u64>>());
    assert_eq!(multi.get(&recs[1]), &[1]);
    assert!(multi.get(b"absent").is_empty());
    let idx = Index::build(&r, Some(&[3, 1, 1]), 1).unwrap();
    assert_eq!(idx.get(&recs[1]), Some(1));
    assert_eq!(idx.unique(), 2);

    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (r, recs) = (&r, &recs);
            s.spawn(move || assert_eq!(r.get(t * 100).unwrap(), recs[(t * 100) as usize]));
        }
    });
}

#[test]
fn bad_input_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.bagz");
    let mut w = Writer::create(&path, &WriterOptions::new()).unwrap();
    w.write_all(&records()[..20]).unwrap();
    w.commit().unwrap();
    let r = Reader::open(&path).unwrap();
    let err = r.read(&[0, 20], 1).unwrap_err();
    assert_eq!(err.status(), Status::OutOfRange);
    assert!(err.message().contains("20"), "{err}");

    // Truncated: the limits no longer make sense.
    let bytes = std::fs::read(&path).unwrap();
    let torn = dir.path().join("torn.bagz");
    std::fs::write(&torn, &bytes[..bytes.len() - 3]).unwrap();
    let err = Reader::open(&torn).and_then(|r| r.read_range(0, r.len(), 1).map(|_| ())).unwrap_err();
    assert_eq!(err.status(), Status::Corrupt);
    assert!(err.message().contains("torn.bagz"), "{err}");

    assert_eq!(Reader::open(dir.path().join("missing.bagz")).unwrap_err().status(), Status::NotFound);

    // A temporary whose writer is gone is cleaned; the committed file stays.
    let stale = dir.path().join("x.bagz.tmp-999999999-1");
    std::fs::write(&stale, b"partial").unwrap();
    assert_eq!(a2pack::clean_temps(&path).unwrap(), vec![stale.clone()]);
    assert!(!stale.exists() && path.exists());

    // An uncommitted writer leaves nothing.
    let abandoned = dir.path().join("abandoned.bagz");
    let mut w = Writer::create(&abandoned, &WriterOptions::new()).unwrap();
    w.write(b"x").unwrap();
    drop(w);
    assert_eq!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("abandoned"))
            .count(),
        0
    );
}

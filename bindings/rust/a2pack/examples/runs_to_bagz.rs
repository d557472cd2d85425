//! Write every run file of a folder into one .bagz record file (one record
//! per run, the run file's bytes), check each run on the way, and read the
//! records back as runs.
//!
//! cargo run --release --example runs_to_bagz -- RUNS_DIR OUT.bagz

use std::path::PathBuf;

use a2pack::bag::{Reader, Writer, WriterOptions};
use a2pack::{Run, RunBatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (dir, out) = match (args.next(), args.next()) {
        (Some(d), Some(o)) => (PathBuf::from(d), PathBuf::from(o)),
        _ => return Err("usage: runs_to_bagz RUNS_DIR OUT.bagz".into()),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "a2run2"));
    files.sort();

    let mut w = Writer::create(&out, &WriterOptions::new())?;
    for f in &files {
        let bytes = std::fs::read(f)?;
        Run::decode(&bytes).map_err(|e| format!("{}: {e}", f.display()))?;
        w.write(&bytes)?;
    }
    w.commit()?;

    let r = Reader::open(&out)?;
    let records: Vec<Vec<u8>> = r.iter().collect::<Result<_, _>>()?;
    let batch = RunBatch::decode(&records, 0)?;
    println!(
        "{}: {} runs, {} steps, {} bytes stored",
        out.display(),
        batch.len(),
        batch.columns().boards.len(),
        r.stored_bytes()
    );
    Ok(())
}

//! Uses the a2pack crate as a dependent program would: generates runs,
//! builds a dataset, samples it and prints rows. `consumer fail` ends with
//! an a2pack error returned from `main` (one line on stderr, exit 1).

fn main() -> Result<(), a2pack::Error> {
    let dir = std::env::temp_dir().join(format!("a2pack-consumer-{}", std::process::id()));
    let result = run(&dir, std::env::args().nth(1).as_deref() == Some("fail"));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run(dir: &std::path::Path, fail: bool) -> Result<(), a2pack::Error> {
    println!("a2pack {} (abi {})", a2pack::version(), a2pack::abi_version());
    println!("library: {}", a2pack::sys::LIBRARY_SOURCE);
    if fail {
        a2pack::Dataset::open(dir.join("no-such-dataset"))?;
    }
    let runs = dir.join("runs");
    a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(30).write_dir(&runs, 4, 7)?;
    a2pack::dataset::build(&runs, dir.join("ds"), &a2pack::BuildOptions::new().workers(1), None)?;
    let ds = a2pack::Dataset::open(dir.join("ds"))?;
    let sampler = a2pack::Sampler::new(None, ds.rows().len(), 3, 8, false)?;
    let mut rows = 0usize;
    for batch in sampler {
        for row in ds.gather_vec(&batch, 1)? {
            // Fields read in format! through the accessors.
            assert!(format!("{} {} {:?}", row.run_id(), row.step_index(), row.ev_values()).len() > 4);
            rows += 1;
        }
    }
    assert_eq!(rows, ds.rows().len());
    println!("consumer ok: {rows} rows");
    Ok(())
}

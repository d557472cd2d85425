//! A training-style loop: random batches of steps from a dataset, gathered
//! straight into the arrays a model would take (one-hot-able tile exponents,
//! legal-move masks, target values), epoch after epoch, with a run-disjoint
//! validation split.
//!
//! cargo run --release --example training_loop -- DATASET_DIR [EPOCHS]

use a2pack::{ColumnsMut, Dataset, Sampler};

const BATCH: usize = 1024;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: training_loop DATASET_DIR [EPOCHS]")?;
    let epochs: u64 = args.next().map_or(Ok(2), |e| e.parse())?;
    let ds = Dataset::open(&dir)?;
    let (train, val) = ds.split(None, &[], 0.1, 42, None, &[])?;
    println!("{} rows: {} train, {} validation", ds.info().rows, train.len(), val.len());

    let mut sampler = Sampler::new(Some(&train), 0, 7, BATCH, true)?;
    let mut exponents = vec![0u8; BATCH * 16];
    let mut legal = vec![0u8; BATCH * 4];
    let mut targets = vec![0f32; BATCH * 4];
    let mut moves = vec![0u8; BATCH];
    for epoch in 0..epochs {
        sampler.set_epoch(epoch)?;
        let (mut seen, mut checksum) = (0usize, 0f64);
        let batches = sampler.len();
        for idx in sampler.by_ref() {
            let mut cols = ColumnsMut {
                exponents: Some(&mut exponents),
                legal: Some(&mut legal),
                ev_values: Some(&mut targets),
                moves: Some(&mut moves),
                ..Default::default()
            };
            ds.gather_columns(&idx, &mut cols, 0)?;
            // A model's step would go here; this stands in for it.
            checksum += targets.iter().map(|&v| f64::from(v)).sum::<f64>();
            seen += idx.len();
        }
        println!("epoch {epoch}: {batches} batches, {seen} rows, target sum {checksum:.1}");
    }
    Ok(())
}

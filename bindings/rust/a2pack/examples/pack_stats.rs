//! Print a packfile's statistics and histograms, then decode every run in
//! batches and count steps and moves.
//!
//! cargo run --release --example pack_stats -- runs.a2pack

use a2pack::{Pack, PackIterOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: pack_stats PACK")?;
    let pack = Pack::open(&path)?;
    let s = pack.stats(0)?;
    println!("{path}: {} runs, {} steps", s.count, s.total_steps);
    println!(
        "run length: min {} / p50 {} / p90 {} / p99 {} / max {} (mean {:.1})",
        s.min_len, s.p50, s.p90, s.p99, s.max_len, s.mean_len
    );
    let h = pack.histograms(0)?;
    for (tile, runs) in &h.tiles {
        println!("  highest tile {tile:>6}: {runs} runs");
    }
    for (engine, runs) in &h.engines {
        println!("  engine {:>12}: {runs} runs", engine.as_deref().unwrap_or("(none)"));
    }
    let (mut steps, mut moves) = (0usize, [0u64; 4]);
    for batch in pack.iter(&PackIterOptions::new().batch_size(512))? {
        let batch = batch?;
        let cols = batch.runs.columns();
        steps += cols.boards.len();
        for &m in cols.moves {
            moves[m as usize] += 1;
        }
    }
    println!("decoded {steps} steps; moves U/D/L/R = {moves:?}");
    Ok(())
}

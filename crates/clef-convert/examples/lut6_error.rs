//! Reconstruction error of a LUT-6 bundle against the release it came from: per LUT tensor
//! Σ(w − ŵ)² / Σw², and the weighted total.
//!
//! `cargo run --release -p clef-convert --example lut6_error -- RELEASE_DIR BUNDLE_DIR`

use clef_ane::{StoredAs, TensorsFile, WEIGHT_BIN};
use clef_formats::coreml::BlobFile;
use clef_model::checkpoint::{backbone_files, safetensors_file};
use clef_quant::lut6::unpack6;
use std::collections::HashMap;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (release, bundle) = match (args.get(1), args.get(2)) {
        (Some(r), Some(b)) => (PathBuf::from(r), PathBuf::from(b)),
        _ => return Err("usage: lut6_error RELEASE_DIR BUNDLE_DIR".into()),
    };
    let mut source = HashMap::new();
    for f in backbone_files(&release)? {
        for t in safetensors_file::open(&f)?.tensors {
            source.insert(t.name.clone(), t);
        }
    }
    let tensors = TensorsFile::load(&bundle)?;
    let bytes = std::fs::read(bundle.join(WEIGHT_BIN))?;
    let blobs = BlobFile::parse(&bytes)?;
    let (mut err_all, mut norm_all) = (0.0f64, 0.0f64);
    for e in &tensors.tensors {
        let StoredAs::Lut6 { indices, lut } = e.stored else {
            continue;
        };
        let (rows, cols) = (e.shape[0], e.shape[1]);
        let w = source
            .get(&e.name)
            .ok_or_else(|| format!("{} missing from the release", e.name))?
            .to_f32()?;
        let idx = unpack6(blobs.blob_at(indices)?.data, rows * cols)?;
        let table: Vec<f32> = blobs
            .blob_at(lut)?
            .data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
        let (mut err, mut norm) = (0.0f64, 0.0f64);
        for (k, (&v, &i)) in w.iter().zip(&idx).enumerate() {
            let r = table[k / cols / 16 * 64 + i as usize];
            err += f64::from(v - r).powi(2);
            norm += f64::from(v).powi(2);
        }
        err_all += err;
        norm_all += norm;
        println!(
            "{:<64} {:>14} {:.4e}",
            e.name,
            format!("{rows}x{cols}"),
            err / norm
        );
    }
    println!(
        "{:<64} {:>14} {:.4e}",
        "all LUT-6 tensors",
        "",
        err_all / norm_all
    );
    Ok(())
}

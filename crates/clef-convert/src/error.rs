//! Conversion errors: the source model's problems, the quantizers', and I/O.

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Model(#[from] clef_model::ModelError),
    #[error(transparent)]
    Quant(#[from] clef_quant::QuantError),
    #[error("{0}")]
    Invalid(String),
    #[error("calibration: {0}")]
    Calibration(String),
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A blob storage failure is reported as the quantizers' (as when that storage lived there).
impl From<clef_formats::coreml::BlobError> for ConvertError {
    fn from(e: clef_formats::coreml::BlobError) -> Self {
        ConvertError::Quant(e.into())
    }
}

pub type Result<T, E = ConvertError> = std::result::Result<T, E>;

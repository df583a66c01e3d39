//! clef-quant

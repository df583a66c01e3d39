//! clef-kernels

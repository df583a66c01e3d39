//! clef-model

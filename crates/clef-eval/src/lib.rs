//! clef-eval

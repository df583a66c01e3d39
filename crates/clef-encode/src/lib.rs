//! clef-encode

//! clef-media

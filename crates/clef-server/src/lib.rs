//! clef-server

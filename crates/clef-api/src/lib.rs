//! clef-api

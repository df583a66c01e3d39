//! The literal prompt pieces of encoding.md §4.

use std::fmt::Write;

use clef_api::{Question, QuestionOption};

use crate::render::write_sorted;
use clef_api::json::write_json_string;

pub const SYSTEM_PROMPT: &str = "Read the complete state and schema. Decide every field jointly. \
                                 Each answer must be exactly one of that field's allowed options.";

pub fn prefix() -> String {
    format!("<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\nSTATE:\n")
}

pub const SUFFIX: &str =
    "\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:";
pub const SCHEMA_HEADER: &str = "\n\nSCHEMA FIELDS:\n";
pub const ALLOWED_OPTIONS: &str = "\nALLOWED OPTIONS:\n";
pub const OPTION_END: &str = "\n";
pub const END_FIELD: &str = "END FIELD\n";

/// `\nFIELD {i}\nID: {id}\nTYPE: {type}\nINSTRUCTION: ` with `i` counting from 1.
pub fn field_header(number: usize, question: &Question) -> String {
    format!(
        "\nFIELD {number}\nID: {}\nTYPE: {}\nINSTRUCTION: ",
        question.id, question.kind
    )
}

/// `OPTION {k}: ` with `k` counting from 1.
pub fn option_label(number: usize) -> String {
    format!("OPTION {number}: ")
}

/// `render({"option_id": id, "description": d})`: with sorted keys `description` always comes
/// first, and a `None` description leaves the key out.
pub fn option_json(option: &QuestionOption) -> String {
    let mut out = String::with_capacity(option.id.len() + 32);
    out.push('{');
    if let Some(description) = &option.description {
        out.push_str("\"description\":");
        write_sorted(&mut out, description);
        out.push(',');
    }
    out.push_str("\"option_id\":");
    write_json_string(&mut out, &option.id);
    out.push('}');
    out
}

/// The text the reference's processor tokenizes for the media: one nested block per image and
/// video (with timestamps per video group), then `\n`.
pub fn media_text(media: &crate::media::MediaLayout) -> String {
    use crate::special::{IMAGE_PAD, VIDEO_PAD, VISION_END, VISION_START};
    let mut out = String::new();
    for image in &media.images {
        out.push_str(VISION_START);
        out.reserve(IMAGE_PAD.len() * image.merged_tokens);
        for _ in 0..image.merged_tokens {
            out.push_str(IMAGE_PAD);
        }
        out.push_str(VISION_END);
    }
    for video in &media.videos {
        out.push_str(VISION_START);
        for group in &video.groups {
            // Python's f"{t:.1f}": both round the exact binary value half to even.
            let _ = write!(out, "<{:.1} seconds>", group.seconds);
            out.push_str(VISION_START);
            out.reserve(VIDEO_PAD.len() * group.merged_tokens);
            for _ in 0..group.merged_tokens {
                out.push_str(VIDEO_PAD);
            }
            out.push_str(VISION_END);
        }
        out.push_str(VISION_END);
    }
    out.push('\n');
    out
}

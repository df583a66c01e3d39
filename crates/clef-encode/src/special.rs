//! Special token ids, read from the tokenizer by their strings (the tiny fixture vocabularies
//! put them at other ids than the real one).

use tokenizers::Tokenizer;

use crate::error::EncodeError;

pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";
pub const END_OF_TEXT: &str = "<|endoftext|>";
pub const VISION_START: &str = "<|vision_start|>";
pub const VISION_END: &str = "<|vision_end|>";
pub const IMAGE_PAD: &str = "<|image_pad|>";
pub const VIDEO_PAD: &str = "<|video_pad|>";

/// The ids the engine needs by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialTokens {
    pub im_start: u32,
    pub im_end: u32,
    /// Padding and text end of sequence.
    pub endoftext: u32,
    pub vision_start: u32,
    pub vision_end: u32,
    pub image_pad: u32,
    pub video_pad: u32,
}

impl SpecialTokens {
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> Result<Self, EncodeError> {
        let id = |token: &'static str| {
            tokenizer
                .token_to_id(token)
                .ok_or(EncodeError::MissingSpecialToken { token })
        };
        Ok(SpecialTokens {
            im_start: id(IM_START)?,
            im_end: id(IM_END)?,
            endoftext: id(END_OF_TEXT)?,
            vision_start: id(VISION_START)?,
            vision_end: id(VISION_END)?,
            image_pad: id(IMAGE_PAD)?,
            video_pad: id(VIDEO_PAD)?,
        })
    }
}

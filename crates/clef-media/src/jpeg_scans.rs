//! The scan bound of JPEG files, checked from the markers before libjpeg sees the bytes.
//!
//! A progressive JPEG's decoding cost is its pixel count times its scan count: libjpeg walks
//! every block of the component(s) of each scan, even for a scan whose data is a few bytes of
//! end-of-band runs. A 94 KB 4000×4000 file with 1,000 refinement scans keeps a core busy for
//! 8–20 s, and 4 MiB carries far more. Encoders write 1 scan (baseline), 10 (libjpeg's default
//! progressive script for colour) or a few dozen at most (mozjpeg's scan optimisation), so the
//! limits in [`MediaLimits`] sit far above real files and refuse the rest before any decoding.

use crate::error::MediaError;
use crate::limits::MediaLimits;

/// Start-of-scan markers (`FF DA`) up to the end-of-image marker, walked the way libjpeg reads
/// them: fill bytes and garbage between segments are skipped, segment lengths are followed,
/// entropy-coded data is skipped up to the next marker (`FF 00` stuffing and restart markers
/// belong to the data). A structure that ends early just ends the count: whether the file is
/// valid stays libjpeg's decision (and its clear 422), this only bounds the work.
pub(crate) fn count_scans(bytes: &[u8]) -> u64 {
    let mut scans = 0u64;
    // after SOI (the caller has checked the magic number)
    let mut pos = 2usize;
    loop {
        // the next marker: skip to an FF, then over fill FFs
        while pos < bytes.len() && bytes[pos] != 0xFF {
            pos += 1;
        }
        while pos < bytes.len() && bytes[pos] == 0xFF {
            pos += 1;
        }
        let Some(&code) = bytes.get(pos) else {
            return scans;
        };
        pos += 1;
        match code {
            // stuffed zero and restart markers (entropy data), TEM and SOI: no length field
            0x00 | 0x01 | 0xD0..=0xD8 => {}
            // end of image
            0xD9 => return scans,
            _ => {
                let Some(len) = bytes.get(pos..pos + 2) else {
                    return scans;
                };
                let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
                if len < 2 {
                    return scans;
                }
                if code == 0xDA {
                    scans += 1;
                }
                pos += len;
            }
        }
    }
}

/// The most scans a `width × height` JPEG may have under `limits`: `max_jpeg_scans`, and fewer
/// for large images so that scans × pixels stays within `max_jpeg_scan_pixels` (never below 1).
pub(crate) fn scan_limit(width: u32, height: u32, limits: &MediaLimits) -> u64 {
    let pixels = (u64::from(width) * u64::from(height)).max(1);
    (limits.max_jpeg_scan_pixels / pixels)
        .min(limits.max_jpeg_scans)
        .max(1)
}

/// Refuses a JPEG with more scans than [`scan_limit`] allows (422 naming the limit).
pub(crate) fn check_scans(
    bytes: &[u8],
    width: u32,
    height: u32,
    limits: &MediaLimits,
) -> Result<(), MediaError> {
    let scans = count_scans(bytes);
    let limit = scan_limit(width, height, limits);
    if scans > limit {
        return Err(MediaError::TooManyScans {
            scans,
            width,
            height,
            limit,
            max_scans: limits.max_jpeg_scans,
            max_scan_pixels: limits.max_jpeg_scan_pixels,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(code: u8, body: &[u8]) -> Vec<u8> {
        let mut s = vec![0xFF, code];
        s.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
        s.extend_from_slice(body);
        s
    }

    /// SOI, a table, `n` scans whose entropy data holds stuffed FFs and restart markers, EOI.
    fn file(n: usize) -> Vec<u8> {
        let mut f = vec![0xFF, 0xD8];
        f.extend(segment(0xDB, &[0; 65]));
        for _ in 0..n {
            f.extend(segment(0xDA, &[1, 1, 0, 0, 63, 0]));
            f.extend([0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56, 0xFF, 0xFF, 0x00]);
        }
        f.extend([0xFF, 0xD9]);
        f
    }

    #[test]
    fn counts_scans_through_entropy_data() {
        for n in [0, 1, 10, 300] {
            assert_eq!(count_scans(&file(n)), n as u64);
        }
    }

    #[test]
    fn stops_at_end_of_image_and_at_broken_structure() {
        let mut f = file(3);
        // scans after EOI are not read by libjpeg either
        f.extend(segment(0xDA, &[1, 1, 0, 0, 63, 0]));
        assert_eq!(count_scans(&f), 3);
        // truncated inside a length field, a zero length: the count so far
        let t = file(2);
        assert_eq!(count_scans(&t[..t.len() - 3]), 2);
        assert_eq!(count_scans(&[0xFF, 0xD8, 0xFF, 0xDA, 0x00]), 0);
        assert_eq!(
            count_scans(&[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x00, 0xFF, 0xDA]),
            0
        );
        assert_eq!(count_scans(&[0xFF, 0xD8]), 0);
    }

    #[test]
    fn limit_scales_with_pixels() {
        let l = MediaLimits::default();
        assert_eq!(scan_limit(640, 480, &l), 100);
        assert_eq!(scan_limit(4000, 4000, &l), 64);
        assert_eq!(scan_limit(0, 0, &l), 100);
        let tight = MediaLimits {
            max_jpeg_scan_pixels: 10,
            ..l
        };
        assert_eq!(scan_limit(4000, 4000, &tight), 1);
    }
}

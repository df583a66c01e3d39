//! The integer micro-kernel contract and the portable tile (the others are in
//! `crate::x86::int8_tiles`; the kernel table picks one per code range).
//!
//! A tile computes `C[MR × MP]` for `MR` weight rows (the broadcast operand, int8 codes in a
//! row-major panel of stride [`KC`]) and `MP` activation rows (the vector operand, packed as
//! 32-bit words of four consecutive codes: step `s` (columns `4s..4s + 4`), lane `b` at
//! `x[(s·MP + b)·4..]`), over `groups` whole groups of `4 · steps` columns, applying each
//! group's scales as it ends (module docs of [`super`]). Unsigned tiles read the activations as
//! `qx + bias` bytes and undo the bias with `−bias · Σ qw` per (row, group).
//!
//! The group is [`GROUP`](super::GROUP) = 64 columns for the project's own formats and 32 or 16 for ggml's
//! block types (their scales cover 32 or 16 values); each tile takes every multiple of 16 from
//! its [`Int8Tile::min_group`] on (the table gives narrower groups to another tile).

/// Columns of one k-block of the integer product (8 groups; a block of 16 × 12 weight rows is
/// 96 KiB of codes, which stays in L2).
pub(crate) const KC: usize = 512;
/// The group sizes the tiles take: multiples of 16 columns (the AVX2 4-bit tile widens its
/// pair sums every 4 steps) that divide [`KC`].
pub(crate) fn group_is_supported(group: usize) -> bool {
    group >= 16 && group.is_multiple_of(16) && KC.is_multiple_of(group)
}

/// Raw operands of one tile; the driver checks every extent before building one.
pub(crate) struct TileArgs {
    /// Whole groups in this k-block.
    pub groups: usize,
    /// Code steps (4 columns) per group: `group / 4`.
    pub steps: usize,
    /// Weight codes: row `a`, column `c` at `w[a·KC + c]`.
    pub w: *const i8,
    /// Weight scales, offsets and (unsigned tiles) `−bias · Σ codes`: row `a`, group `g` at
    /// `[a·gs + g]`.
    pub wscale: *const f32,
    pub woff: *const f32,
    /// (Read by the unsigned tiles only, which only x86 has so far.)
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub wcorr: *const i32,
    pub gs: usize,
    /// Packed activation codes (see the module docs), `qx + bias` for unsigned tiles.
    pub x: *const u8,
    /// Activation scales and `scale · Σ codes` per group and lane: `[g·MP + b]`.
    pub xscale: *const f32,
    pub xsum: *const f32,
    /// Output `c[a·ldc + b]`.
    pub c: *mut f32,
    pub ldc: usize,
    /// Overwrite `c` (first k-block) instead of accumulating into it.
    pub init: bool,
    /// Groups per super-block under the super-block contract (`crate::int8`'s module docs),
    /// 0 under the per-group one. There `xscale` holds one scale per super-block and lane
    /// (`[s·MP + b]`) and `xsum` the groups' code sums as f32 (`[g·MP + b]`, integers).
    pub sb: usize,
}

/// The super-block end of one tile under the super-block contract: `c = fma(t, sx, c)` for
/// `mr × mp` outputs.
struct SuperblockEnd {
    /// The super-block's `t` per output: `t[a·mp + b]`.
    t: *const f32,
    mr: usize,
    mp: usize,
    c: *mut f32,
    ldc: usize,
    /// The first super-block of the product: `c` starts at +0 instead of being read.
    first: bool,
    /// The super-block's activation scales, `sx[b]`.
    sx: *const f32,
}

/// The most lanes a tile has (the AVX-512 VNNI tile's 64).
const MAX_MP: usize = 64;

/// The super-block end of [`run_superblocks`].
///
/// # Safety
/// Every pointer must cover the extents [`SuperblockEnd`] names.
unsafe fn superblock_end(e: &SuperblockEnd) {
    for a in 0..e.mr {
        let t = std::slice::from_raw_parts(e.t.add(a * e.mp), e.mp);
        let sx = std::slice::from_raw_parts(e.sx, e.mp);
        let c = std::slice::from_raw_parts_mut(e.c.add(a * e.ldc), e.mp);
        for ((c, &t), &sx) in c.iter_mut().zip(t).zip(sx) {
            let prev = if e.first { 0.0 } else { *c };
            *c = t.mul_add(sx, prev);
        }
    }
}

/// Ones for the per-super-block runs of [`run_superblocks`]: `sw · 1` is `sw` exactly.
static ONES: [f32; 16 * MAX_MP] = [1.0; 16 * MAX_MP];

/// The super-block contract on a tile of the per-group one, for the levels without a tile of
/// their own for it: per super-block, the tile with activation scales of 1 and the groups' code
/// sums as its `scale · Σ codes` gives `t` exactly as the contract forms it (`sw · 1 = sw`, and
/// `f32(dot)` is exact), written to a scratch `t`; [`superblock_end`] then applies the
/// super-block's scale. (A call per super-block and the round trip of `t` through memory cost
/// the AVX2 tiles a fifth of their speed, which is why x86 has tiles of the contract.)
///
/// # Safety
/// `args` must satisfy [`Int8Tile::run`] for `tile` under the super-block contract.
pub(crate) unsafe fn run_superblocks(tile: &Int8Tile, args: &TileArgs, affine: bool) {
    let (sb, mp) = (args.sb, tile.mp);
    assert!((1..=16).contains(&sb) && args.groups.is_multiple_of(sb));
    assert!(tile.mr * mp <= 16 * MAX_MP);
    // Written whole by each run's tile (`init`) before `superblock_end` reads it.
    let mut t = std::mem::MaybeUninit::<[f32; 16 * MAX_MP]>::uninit();
    let t = t.as_mut_ptr().cast::<f32>();
    for s in 0..args.groups / sb {
        let g0 = s * sb;
        let run = TileArgs {
            groups: sb,
            steps: args.steps,
            w: args.w.add(g0 * 4 * args.steps),
            wscale: args.wscale.add(g0),
            woff: args.woff.add(g0),
            wcorr: args.wcorr.add(g0),
            gs: args.gs,
            x: args.x.add(g0 * args.steps * mp * 4),
            xscale: ONES.as_ptr(),
            xsum: args.xsum.add(g0 * mp),
            c: t,
            ldc: mp,
            init: true,
            sb: 0,
        };
        tile.run(&run, affine);
        superblock_end(&SuperblockEnd {
            t,
            mr: tile.mr,
            mp,
            c: args.c,
            ldc: args.ldc,
            first: args.init && s == 0,
            sx: args.xscale.add(s * mp),
        });
    }
}

pub(crate) type TileFn = unsafe fn(&TileArgs);

/// A tile implementation with its shape, as the kernel table holds it (only tiles this CPU
/// runs).
#[derive(Clone, Copy)]
pub(crate) struct Int8Tile {
    pub mr: usize,
    pub mp: usize,
    /// Activations are packed as `qx + x_bias` (u8; 0: signed `qx` as i8).
    pub x_bias: i32,
    /// The narrowest group the table gives this tile (16, or 32 for AMX, whose products at 16
    /// columns ran slower than the VNNI tile's); narrower ones go to its `int8_any_group` tile.
    pub min_group: usize,
    pub plain: TileFn,
    pub affine: TileFn,
}

/// A level's tiles of the super-block contract, per code range of ggml's K-quants (4-bit and
/// narrower codes, 5- and 6-bit ones), with the name `clef bench` and `/v1/models` give them.
#[derive(Clone, Copy)]
pub(crate) struct SuperblockTiles {
    pub nibble: Int8Tile,
    pub byte: Int8Tile,
    pub name: &'static str,
}

/// The portable tile (the kernel table's default for every code range).
pub(crate) fn portable_tile() -> Int8Tile {
    Int8Tile {
        mr: portable::MR,
        mp: portable::MP,
        x_bias: 0,
        min_group: 16,
        plain: portable::tile::<false>,
        affine: portable::tile::<true>,
    }
}

impl Int8Tile {
    /// Runs one tile.
    ///
    /// # Safety
    /// Every pointer in `args` must cover the extents the module docs give for `self.mr` rows,
    /// `self.mp` lanes and `args.groups` groups.
    #[inline]
    pub(crate) unsafe fn run(&self, args: &TileArgs, affine: bool) {
        if affine {
            (self.affine)(args)
        } else {
            (self.plain)(args)
        }
    }
}

/// The group-end update of one output, shared by the portable tile and the reference twin.
#[inline(always)]
pub(crate) fn finish_group(
    c: f32,
    dot: i32,
    sw: f32,
    sx: f32,
    offset_term: Option<(f32, f32)>,
) -> f32 {
    let c = (dot as f32).mul_add(sw * sx, c);
    match offset_term {
        Some((ow, xsum)) => ow.mul_add(xsum, c),
        None => c,
    }
}

/// Portable Rust: a 4 × 8 tile over signed activation codes.
mod portable {
    use super::{finish_group, TileArgs, KC};

    pub(super) const MR: usize = 4;
    pub(super) const MP: usize = 8;

    /// # Safety
    /// See [`super::Int8Tile::run`].
    pub(super) unsafe fn tile<const AFFINE: bool>(t: &TileArgs) {
        for g in 0..t.groups {
            let mut dots = [[0i32; MP]; MR];
            for s in 0..t.steps {
                let col = 4 * (g * t.steps + s);
                let xs = t.x.add((g * t.steps + s) * MP * 4).cast::<i8>();
                for (a, row) in dots.iter_mut().enumerate() {
                    let w = t.w.add(a * KC + col);
                    for (b, d) in row.iter_mut().enumerate() {
                        for q in 0..4 {
                            *d += i32::from(*w.add(q)) * i32::from(*xs.add(b * 4 + q));
                        }
                    }
                }
            }
            for (a, row) in dots.iter().enumerate() {
                let sw = *t.wscale.add(a * t.gs + g);
                for (b, &dot) in row.iter().enumerate() {
                    let cp = t.c.add(a * t.ldc + b);
                    let prev = if t.init && g == 0 { 0.0 } else { *cp };
                    let sx = *t.xscale.add(g * MP + b);
                    let off = if AFFINE {
                        Some((*t.woff.add(a * t.gs + g), *t.xsum.add(g * MP + b)))
                    } else {
                        None
                    };
                    *cp = finish_group(prev, dot, sw, sx, off);
                }
            }
        }
    }
}

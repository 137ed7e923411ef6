//! The boot self-test: the SMLAD kernels against the portable ones on
//! pseudo-random vectors of every length up to 2·MAX_LATENT, extreme
//! values included — the dot product, the matrix products on every row
//! step they specialise, the widened weights, and the sixteen-row kernel
//! with each start and end it folds in.

use weft_core::gnn::int8::{self, dsp, MAX_LATENT};

/// Pseudo-random int8 values (xorshift), −128 and 127 one draw in sixteen
/// each.
struct Draws(u32);

impl Draws {
    fn next(&mut self) -> i8 {
        let s = &mut self.0;
        *s ^= *s << 13;
        *s ^= *s >> 17;
        *s ^= *s << 5;
        match *s % 16 {
            0 => -128i8,
            1 => 127,
            _ => (*s >> 8) as i8,
        }
    }
    /// An activation: never −128 (the kernels' inputs come from `SSAT`
    /// to −127…127 or from a ReLU).
    fn activation(&mut self) -> i8 {
        self.next().max(-127)
    }
}

/// Runs every check; the number of products compared, or the length (or
/// row step, or `1000 +` / `2000 +` / `3000 +` the input width of the
/// sixteen-row kernel) of the first that differed.
pub fn dsp_matches_portable() -> Result<u32, usize> {
    let mut draws = Draws(0x2545_f491);
    let mut count = dot_products(&mut draws)?;
    count += matrix_rows(&mut draws)?;
    count += widened(&mut draws)?;
    count += rows16(&mut draws)?;
    Ok(count)
}

/// `dsp::dot` on packed activations against `int8::dot`.
fn dot_products(draws: &mut Draws) -> Result<u32, usize> {
    let mut count = 0;
    for len in 1..=2 * MAX_LATENT {
        for _ in 0..8 {
            let (mut w, mut x) = ([0i8; 2 * MAX_LATENT], [0i8; 2 * MAX_LATENT]);
            for k in 0..len {
                w[k] = draws.next();
                x[k] = draws.activation();
            }
            let mut packed = [0u32; MAX_LATENT];
            let n = dsp::pack(&x[..len], &mut packed);
            if dsp::dot(&w[..len], &packed[..n], &x[2 * n..len]) != int8::dot(&w[..len], &x[..len]) {
                return Err(len);
            }
            count += 1;
        }
    }
    Ok(count)
}

/// The matrix kernel on every row step it specialises (and one it does
/// not), at every column block, on odd and even row counts, from the
/// biases and in place.
fn matrix_rows(draws: &mut Draws) -> Result<u32, usize> {
    const ROWS: usize = 5;
    let mut count = 0;
    let bias: [i32; ROWS] = core::array::from_fn(|o| 1000 * o as i32 - 2000);
    for stride in [16, 32, 48, 64, 96, 24] {
        let mut w = [0i8; 96 * ROWS];
        for v in &mut w[..stride * ROWS] {
            *v = draws.next();
        }
        for (len, rows, start) in [(8, 5, false), (16, 4, true), (4, 1, false), (16, 5, true), (8, 1, true)] {
            for col in (0..=stride - len).step_by(8) {
                let mut x = [0i8; 16];
                for v in &mut x[..len] {
                    *v = draws.activation();
                }
                let (mut acc, mut scratch) = ([7i32; ROWS], [0u32; MAX_LATENT]);
                let from = start.then_some(&bias[..]);
                dsp::accumulate(&w[..stride * ROWS], stride, col, &x[..len], from, &mut scratch, &mut acc[..rows]);
                for (o, a) in acc.iter().enumerate() {
                    let base = if o < rows && start { bias[o] } else { 7 };
                    let sum = if o < rows { int8::dot(&w[o * stride + col..][..len], &x[..len]) } else { 0 };
                    if *a != base + sum {
                        return Err(stride);
                    }
                }
                count += 1;
            }
        }
    }
    Ok(count)
}

/// The widened-weight kernel on every shape the network has (a last block
/// of fewer than eight inputs padded), from the biases and in place.
fn widened(draws: &mut Draws) -> Result<u32, usize> {
    let mut count = 0;
    for (inputs, rows, start) in
        [(16, 4, true), (48, 3, false), (32, 5, true), (8, 1, false), (96, 2, true), (10, 16, true), (15, 3, false)]
    {
        let mut w = [0i8; 192];
        for v in &mut w[..inputs * rows] {
            *v = draws.next();
        }
        let mut wide = [0u32; 128];
        let n = int8::widen(&w[..inputs * rows], inputs, rows, &mut wide);
        let mut x = [0i8; 96];
        for v in &mut x[..inputs] {
            *v = draws.activation();
        }
        let bias: [i32; 16] = core::array::from_fn(|o| 977 * o as i32 - 5000);
        let mut acc = [7i32; 16];
        dsp::accumulate_wide(&wide[..n], &x[..inputs], start.then_some(&bias[..]), &mut acc[..rows]);
        for (o, a) in acc.iter().enumerate() {
            let base = if o < rows && start { bias[o] } else { 7 };
            let sum = if o < rows { int8::dot(&w[o * inputs..][..inputs], &x[..inputs]) } else { 0 };
            if *a != base + sum {
                return Err(inputs);
            }
        }
        count += 1;
    }
    Ok(count)
}

/// The sixteen-row kernel with each start and each end it folds in, on
/// the network's input widths, against the portable dot products and the
/// requantisation written out.
fn rows16(draws: &mut Draws) -> Result<u32, usize> {
    let mut count = 0;
    let shifts: [u8; 16] = core::array::from_fn(|k| ([0, 1, 7, 12, 31][k % 5] + (k as u8 / 5)).min(31));
    for inputs in [10, 12, 15, 16, 20, 32, 48] {
        let mut w = [0i8; 16 * 48];
        for v in &mut w[..inputs * 16] {
            *v = draws.next();
        }
        let mut wide = [0u32; 4 * 6 * 16];
        let n = int8::widen(&w[..inputs * 16], inputs, 16, &mut wide);
        let mut x = [0i8; 48];
        for v in &mut x[..inputs] {
            *v = draws.activation();
        }
        let from: [i32; 16] = core::array::from_fn(|o| (draws.next() as i32) << (o % 20));
        let other: [i32; 16] = core::array::from_fn(|o| (draws.next() as i32) << (o % 14));
        let y0: [i8; 16] = core::array::from_fn(|_| draws.next());
        for (start, end) in (0..3).flat_map(|s| (0..4).map(move |e| (s, e))) {
            let mut acc = [7i32; 16];
            let mut y = y0;
            let begin = match start {
                0 => dsp::Start::From(&from),
                1 => dsp::Start::Sum(&from, &other),
                _ => dsp::Start::Acc,
            };
            let finish = match end {
                0 => dsp::End::Acc,
                1 => dsp::End::Relu(&shifts, &mut y),
                2 => dsp::End::Sat(&shifts, &mut y),
                _ => dsp::End::Residual(&shifts, &mut y),
            };
            // Nine to twelve inputs from the biases: also the edge
            // encoder's fixed-block layer, which must write the same.
            let mut twelve = None;
            if (9..=12).contains(&inputs) && start == 0 {
                let (mut acc12, mut y12) = ([7i32; 16], y0);
                let x12: [i8; 12] = core::array::from_fn(|k| x[k]);
                let w128: &[u32; 128] = wide.first_chunk().ok_or(3000 + inputs)?;
                let end12 = match end {
                    0 => dsp::End::Acc,
                    1 => dsp::End::Relu(&shifts, &mut y12),
                    2 => dsp::End::Sat(&shifts, &mut y12),
                    _ => dsp::End::Residual(&shifts, &mut y12),
                };
                dsp::layer12(w128, &x12, &from, &mut acc12, end12);
                twelve = Some((acc12, y12));
            }
            if !dsp::rows16(&wide[..n], &x[..inputs], begin, &mut acc, finish) {
                return Err(1000 + inputs);
            }
            if twelve.is_some_and(|(a12, y12)| (end == 0 && a12 != acc) || y12 != y) {
                return Err(3000 + inputs);
            }
            for o in 0..16 {
                let base = [from[o], from[o] + other[o], 7][start];
                let a = base + int8::dot(&w[o * inputs..][..inputs], &x[..inputs]);
                let q = a >> shifts[o];
                let want = match end {
                    0 => y0[o],
                    1 => q.clamp(0, 127) as i8,
                    2 => q.clamp(-128, 127) as i8,
                    _ => q.saturating_add(y0[o] as i32).clamp(-128, 127) as i8,
                };
                if (end == 0 && acc[o] != a) || y[o] != want {
                    return Err(2000 + inputs);
                }
            }
            count += 1;
        }
    }
    Ok(count)
}

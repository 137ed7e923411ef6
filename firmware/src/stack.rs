//! Stack use, measured by painting the free RAM below the stack at boot
//! and finding the deepest overwritten word at the end. With flip-link the
//! stack sits between the start of RAM and the statics; without it, between
//! the statics and the end of RAM.

const PAINT: u32 = 0xdead_beef;
/// Start of RAM on both layouts (`memory-*.x`).
const RAM_ORIGIN: usize = 0x2000_0000;
extern "C" {
    static _stack_start: u32;
    static _stack_end: u32;
}

/// The lowest address the stack may reach, and its top.
fn bounds() -> (usize, usize) {
    // Addresses of linker symbols (no access).
    let top = core::ptr::addr_of!(_stack_start) as usize;
    let end = core::ptr::addr_of!(_stack_end) as usize;
    (if end < top { end } else { RAM_ORIGIN }, top)
}

/// Paints the stack region up to 256 bytes below the current stack
/// pointer.
pub fn paint() {
    let (bottom, _) = bounds();
    let sp = cortex_m::register::msp::read() as usize - 256;
    let mut p = bottom as *mut u32;
    while (p as usize) < sp {
        // SAFETY: [bottom, sp − 256) is RAM of the stack region that the
        // live stack has not reached.
        unsafe {
            p.write_volatile(PAINT);
            p = p.add(1);
        }
    }
}

/// Bytes between the top of the stack and the deepest painted word that
/// was overwritten.
pub fn used() -> usize {
    let (bottom, top) = bounds();
    let mut p = bottom as *const u32;
    // SAFETY: reads within the stack region [bottom, top), which is RAM.
    while (p as usize) < top && unsafe { p.read_volatile() } == PAINT {
        p = unsafe { p.add(1) };
    }
    top - p as usize
}

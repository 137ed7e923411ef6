//! Per-node flags of a step: which nodes are pinned, and during a step
//! which are held by a collider's contact constraint (and by which
//! collider). One byte per node; every module reads them through these
//! functions.

/// The node is pinned (a velocity constraint in every direction).
pub const PINNED: u8 = 1;
/// Set only during a step: the node is held by a collider's contact
/// constraint along its contact normal; the collider's index is
/// `flags >> COLLIDER_SHIFT` ([`held_by`]).
pub const CONTACT: u8 = 2;
/// Shift of the contact collider's index in a node's flags.
pub const COLLIDER_SHIFT: u32 = 2;
/// Colliders a model may hold (the index must fit a node's flags).
pub const MAX_COLLIDERS: usize = 1 << (8 - COLLIDER_SHIFT);

/// Whether the node is pinned.
#[inline(always)]
pub const fn pinned(f: u8) -> bool {
    f & PINNED != 0
}

/// Whether the node is held by a contact constraint (it may be pinned too).
#[inline(always)]
pub const fn in_contact(f: u8) -> bool {
    f & CONTACT != 0
}

/// Whether the node is held by a contact constraint and not pinned: free
/// in its contact's tangent plane.
#[inline(always)]
pub const fn on_plane(f: u8) -> bool {
    !pinned(f) && in_contact(f)
}

/// Flags of a node held by collider `k` (`k < MAX_COLLIDERS`).
#[inline(always)]
pub const fn held_by(k: usize) -> u8 {
    CONTACT | ((k as u8) << COLLIDER_SHIFT)
}

/// The index of the collider holding the node, if one does.
#[inline(always)]
pub const fn collider(f: u8) -> Option<usize> {
    if in_contact(f) {
        Some((f >> COLLIDER_SHIFT) as usize)
    } else {
        None
    }
}

/// The flags without the step's contact (what is kept between steps).
#[inline(always)]
pub const fn without_contact(f: u8) -> u8 {
    f & PINNED
}

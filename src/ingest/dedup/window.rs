//! The duplicate window's table: each remembered id's digest ([`Key`]) → its place in the
//! expiry queue, in one array of 16-byte slots, open addressing with linear probing, at most
//! half full, deletion by backward shift (no tombstones).
//!
//! Made for a table far larger than the cache, where every probe of a new id is a miss: a key
//! and its place share a slot, so a probe, an insert and a removal each touch one cache line
//! (the digest's home slot and, rarely, the next), where a general map touches its control bytes
//! and then its bucket, two misses apart. [`Window::warm`] loads the home slots of a request's
//! keys before they are needed, so their misses overlap.

use std::hash::{Hash, Hasher};

/// A team's id, as a 96-bit digest (from two 64-bit hashes under per-process random seeds that
/// differ in their per-hasher part): a collision would take a new event for a duplicate; by
/// chance it is ~2⁻⁷⁶ per id in a window of a million ids, and it cannot be aimed at without the
/// seeds. 32-bit words, so that with a `u32` beside it a slot is 16 bytes. Never all zero (that
/// marks an empty slot).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Key([u32; 3]);

impl Key {
    pub(super) fn new(first: u64, second: u64) -> Self {
        let words = [first as u32, (first >> 32) as u32, (second >> 32) as u32];
        // The one digest that would read as an empty slot stands for another (as likely to
        // collide as any two digests).
        Key(if words == [0; 3] { [1, 0, 0] } else { words })
    }

    /// The first 64 bits: the key is a seeded digest already.
    fn bits(self) -> u64 {
        u64::from(self.0[0]) | u64::from(self.0[1]) << 32
    }
}

impl Hash for Key {
    /// The first 64 bits alone: hashing a digest again (as a map's own hasher would) buys
    /// nothing.
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.bits());
    }
}

/// The window's place of an accepted id: its number in the expiry queue, counted from the first
/// id ever queued (wrapping; the queue never holds near 2³² ids).
pub(super) type Place = u32;

#[derive(Clone, Copy, Default)]
struct Slot {
    key: Key,
    place: Place,
}

impl Slot {
    fn is_empty(&self) -> bool {
        self.key.0 == [0; 3]
    }
}

/// Slots of a new window: it grows by doubling from here.
const FIRST_SLOTS: usize = 1024;

/// Digest → place, for the ids the window remembers.
pub(super) struct Window {
    slots: Vec<Slot>,
    mask: usize,
    len: usize,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            slots: vec![Slot::default(); FIRST_SLOTS],
            mask: FIRST_SLOTS - 1,
            len: 0,
        }
    }
}

impl Window {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn home(&self, key: Key) -> usize {
        // The low bits of a digest are as random as any.
        key.bits() as usize & self.mask
    }

    /// The slot holding `key`, or the empty slot where its probe ends.
    fn find(&self, key: Key) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let slot = &self.slots[i];
            if slot.key == key {
                return (i, true);
            }
            if slot.is_empty() {
                return (i, false);
            }
            i = (i + 1) & self.mask;
        }
    }

    pub(super) fn get(&self, key: Key) -> Option<Place> {
        match self.find(key) {
            (i, true) => Some(self.slots[i].place),
            _ => None,
        }
    }

    pub(super) fn contains(&self, key: Key) -> bool {
        self.find(key).1
    }

    /// Loads the home slot of each of `keys` (their cache lines), in one pass: independent
    /// loads whose misses overlap, where the probes that follow would each wait for their own.
    pub(super) fn warm<'k>(&self, keys: impl Iterator<Item = &'k Key>) {
        for key in keys {
            std::hint::black_box(self.slots[self.home(*key)].place);
        }
    }

    /// Remembers `key` at `place` (replacing the place it had).
    pub(super) fn insert(&mut self, key: Key, place: Place) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let (i, found) = self.find(key);
        if !found {
            self.len += 1;
        }
        self.slots[i] = Slot { key, place };
    }

    /// Forgets `key`; whether it was remembered.
    pub(super) fn remove(&mut self, key: Key) -> bool {
        let (mut hole, found) = self.find(key);
        if !found {
            return false;
        }
        self.len -= 1;
        // Backward shift: each later slot of the run moves into the hole unless its home lies
        // cyclically after the hole (it would then be found before its home).
        let mut i = hole;
        loop {
            i = (i + 1) & self.mask;
            let slot = self.slots[i];
            if slot.is_empty() {
                break;
            }
            let home = self.home(slot.key);
            let stays = if hole <= i {
                hole < home && home <= i
            } else {
                hole < home || home <= i
            };
            if !stays {
                self.slots[hole] = slot;
                hole = i;
            }
        }
        self.slots[hole] = Slot::default();
        true
    }

    fn grow(&mut self) {
        let doubled = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|s| !s.is_empty()) {
            let (i, _) = self.find(slot.key);
            self.slots[i] = slot;
        }
    }

    /// Bytes a remembered id's slot takes (for the memory figures).
    #[cfg(test)]
    pub(super) const SLOT_BYTES: usize = std::mem::size_of::<Slot>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Inserts, overwrites and removals in a random order, against a `HashMap`, with keys
    /// crowded into few home slots (long probe runs that wrap around the end) and spread out.
    #[test]
    fn the_window_agrees_with_a_map() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for crowd in [3u64, 64, u64::MAX] {
            let mut w = Window::default();
            let mut m: HashMap<[u32; 3], Place> = HashMap::new();
            for step in 0..60_000u32 {
                let r = next();
                // Home slots near the end of the table, so runs wrap to its start.
                let low = (FIRST_SLOTS as u64 - 2 + (r >> 8) % crowd.min(1 << 40)) as u32;
                let key = Key::new(u64::from(low) | (r >> 40) << 32, r);
                match r % 3 {
                    0 | 1 => {
                        w.insert(key, step);
                        m.insert(key.0, step);
                    }
                    _ => {
                        // Remove a key that is there about half the time.
                        let victim = match m.keys().next() {
                            Some(k) if r % 2 == 0 => Key(*k),
                            _ => key,
                        };
                        assert_eq!(w.remove(victim), m.remove(&victim.0).is_some());
                    }
                }
                if step % 997 == 0 {
                    assert_eq!(w.len(), m.len());
                    for (k, p) in &m {
                        assert_eq!(w.get(Key(*k)), Some(*p), "step {step}");
                    }
                }
                if m.len() > 3_000 {
                    for k in m.keys().copied().collect::<Vec<_>>() {
                        assert!(w.remove(Key(k)));
                        m.remove(&k);
                        if m.len() < 100 {
                            break;
                        }
                    }
                }
            }
            assert!(w.len() * 2 <= w.slots.len(), "at most half full");
        }
    }

    #[test]
    fn no_key_reads_as_an_empty_slot() {
        let zero = Key::new(0, 0);
        assert_ne!(zero.0, [0; 3]);
        let mut w = Window::default();
        w.insert(zero, 7);
        assert_eq!(w.get(zero), Some(7));
        assert!(w.contains(zero) && w.remove(zero) && !w.contains(zero));
    }
}

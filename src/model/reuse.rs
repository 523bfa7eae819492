//! Keeping a vector's allocation across element types of one layout: scratch vectors whose
//! elements borrow one request's text keep their room for the next request's.

/// `room` emptied, as a vector of another element type of the same size and alignment (in use,
/// one type at two lifetimes). Collecting a mapped `vec::IntoIter` into a vector reuses its
/// allocation when the layouts match (std's in-place iteration); were it not to, this would
/// allocate, and still be right.
pub fn recycle<T, U>(mut room: Vec<T>) -> Vec<U> {
    room.clear();
    room.into_iter()
        .map(|_| unreachable!("the vector is empty"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The room of a vector of borrowed text survives as the room of a vector of other borrows.
    #[test]
    fn the_room_is_kept() {
        let text = String::from("a b c");
        let mut words: Vec<&str> = text.split(' ').collect();
        words.reserve(1000);
        let (at, capacity) = (words.as_ptr() as usize, words.capacity());
        let other: Vec<&'static str> = recycle(words);
        assert!(other.is_empty());
        assert_eq!(other.capacity(), capacity);
        assert_eq!(other.as_ptr() as usize, at);
    }
}

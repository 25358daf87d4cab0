//! SHA-256 as lowercase hex: the one spelling of every hash Aptix writes
//! (catalog fingerprints, request hashes, approval and answer bindings).

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The SHA-256 of `parts`, each prefixed by its length, so that no two
/// different lists of parts hash alike (`["ab", "c"]` and `["a", "bc"]`).
pub(crate) fn sha256_hex_of_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part.len().to_le_bytes());
        hash.update(part);
    }
    hex(&hash.finalize())
}

fn hex(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut hex = String::with_capacity(2 * digest.len());
    for byte in digest {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::{sha256_hex, sha256_hex_of_parts};

    #[test]
    fn hex_of_a_known_digest_and_parts_that_cannot_collide() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(
            sha256_hex_of_parts([b"ab".as_slice(), b"c"]),
            sha256_hex_of_parts([b"a".as_slice(), b"bc"])
        );
    }
}

//! external-dns's encrypted ownership values (`--txt-encrypt-enabled`), byte-compatible with
//! external-dns: the plain value is gzip-compressed, sealed with AES-256-GCM under a 12-byte
//! nonce, and stored as standard base64 of `nonce || ciphertext || tag`. The key is 32 bytes,
//! given as-is or base64-encoded (external-dns accepts both). The key is never logged: this
//! type's `Debug` shows nothing of it.

use std::io::{Read, Write};

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce};

/// GCM's standard nonce length, which external-dns uses.
pub const NONCE_LEN: usize = 12;
const KEY_LEN: usize = 32;
/// A decrypted value larger than this is not an ownership value (they are ~100 bytes); the cap
/// keeps a hostile record from inflating to gigabytes.
const MAX_PLAIN_LEN: u64 = 64 * 1024;

/// Why a key or an encrypted value is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    #[error(
        "the TXT encryption key must be 32 bytes long, as plain text or base64-encoded (external-dns's format)"
    )]
    BadKeyLength,
    #[error("not base64")]
    NotBase64,
    #[error("too short to hold a nonce and a tag")]
    TooShort,
    #[error("does not decrypt with the configured key")]
    Authentication,
    #[error("the decrypted value is not gzip data")]
    NotGzip,
    #[error("encryption failed")]
    Seal,
}

/// The AES-256-GCM key of the TXT registry.
#[derive(Clone)]
pub struct TxtCipher {
    cipher: Aes256Gcm,
    /// Kept only so that two settings can be compared (a changed key is a changed setting).
    key: [u8; KEY_LEN],
}

impl std::fmt::Debug for TxtCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TxtCipher(<redacted>)")
    }
}

impl PartialEq for TxtCipher {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for TxtCipher {}

impl TxtCipher {
    /// external-dns's rule: a key of exactly 32 bytes is used as-is, anything else must be the
    /// base64 of 32 bytes.
    pub fn from_key_text(key: &str) -> Result<Self, CryptoError> {
        let bytes = if key.len() == KEY_LEN {
            key.as_bytes().to_vec()
        } else {
            data_encoding::BASE64
                .decode(key.as_bytes())
                .map_err(|_| CryptoError::BadKeyLength)?
        };
        let key: [u8; KEY_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| CryptoError::BadKeyLength)?;
        let cipher = Aes256Gcm::new_from_slice(&key).map_err(|_| CryptoError::BadKeyLength)?;
        Ok(TxtCipher { cipher, key })
    }

    /// Encrypt `plain` under a fresh random nonce. A fresh nonce per value matters: GCM under
    /// one key and one nonce for two different texts gives both away.
    pub fn encrypt(&self, plain: &str) -> Result<String, CryptoError> {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        self.encrypt_with_nonce(plain, nonce.as_slice())
    }

    /// Encrypt with a given nonce (tests compare with external-dns's own output this way).
    pub fn encrypt_with_nonce(&self, plain: &str, nonce: &[u8]) -> Result<String, CryptoError> {
        if nonce.len() != NONCE_LEN {
            return Err(CryptoError::Seal);
        }
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gzip.write_all(plain.as_bytes())
            .map_err(|_| CryptoError::Seal)?;
        let compressed = gzip.finish().map_err(|_| CryptoError::Seal)?;
        let sealed = self
            .cipher
            .encrypt(Nonce::from_slice(nonce), compressed.as_slice())
            .map_err(|_| CryptoError::Seal)?;
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(nonce);
        out.extend_from_slice(&sealed);
        Ok(data_encoding::BASE64.encode(&out))
    }

    /// Decrypt a value (surrounding quotes tolerated, as external-dns does).
    pub fn decrypt(&self, value: &str) -> Result<String, CryptoError> {
        let value = value.trim().trim_matches('"');
        let data = data_encoding::BASE64
            .decode(value.as_bytes())
            .map_err(|_| CryptoError::NotBase64)?;
        if data.len() <= NONCE_LEN {
            return Err(CryptoError::TooShort);
        }
        let (nonce, sealed) = data.split_at(NONCE_LEN);
        let compressed = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), sealed)
            .map_err(|_| CryptoError::Authentication)?;
        let mut plain = String::new();
        flate2::read::GzDecoder::new(compressed.as_slice())
            .take(MAX_PLAIN_LEN)
            .read_to_string(&mut plain)
            .map_err(|_| CryptoError::NotGzip)?;
        Ok(plain)
    }
}

/// Could `value` be an encrypted ownership value (base64 of at least a nonce, a gzip header and
/// a tag)? Used to tell "encrypted with another key" from an ordinary TXT record.
pub fn looks_encrypted(value: &str) -> bool {
    let value = value.trim().trim_matches('"');
    data_encoding::BASE64
        .decode(value.as_bytes())
        .is_ok_and(|data| data.len() >= NONCE_LEN + 16 + 18)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "01234567890123456789012345678901";

    #[test]
    fn round_trip_with_plain_and_base64_keys() {
        let plain =
            "heritage=external-dns,external-dns/owner=gw,external-dns/resource=httproute/a/b";
        let cipher = TxtCipher::from_key_text(KEY).unwrap();
        let sealed = cipher.encrypt(plain).unwrap();
        assert_ne!(
            sealed,
            cipher.encrypt(plain).unwrap(),
            "fresh nonce each time"
        );
        assert_eq!(cipher.decrypt(&sealed).unwrap(), plain);
        assert_eq!(cipher.decrypt(&format!("\"{sealed}\"")).unwrap(), plain);
        let b64 = data_encoding::BASE64.encode(KEY.as_bytes());
        let same = TxtCipher::from_key_text(&b64).unwrap();
        assert_eq!(same.decrypt(&sealed).unwrap(), plain);
        assert!(looks_encrypted(&sealed));
        assert!(!looks_encrypted(plain));
    }

    #[test]
    fn bad_keys_and_foreign_values_are_errors() {
        assert_eq!(
            TxtCipher::from_key_text("short").unwrap_err(),
            CryptoError::BadKeyLength
        );
        assert_eq!(
            TxtCipher::from_key_text(&data_encoding::BASE64.encode(&[0u8; 16])).unwrap_err(),
            CryptoError::BadKeyLength
        );
        let cipher = TxtCipher::from_key_text(KEY).unwrap();
        let other = TxtCipher::from_key_text("abcdefghijabcdefghijabcdefghij01").unwrap();
        let sealed = other.encrypt("heritage=external-dns").unwrap();
        assert_eq!(
            cipher.decrypt(&sealed).unwrap_err(),
            CryptoError::Authentication
        );
        assert_eq!(
            cipher.decrypt("v=spf1 -all").unwrap_err(),
            CryptoError::NotBase64
        );
        assert_eq!(cipher.decrypt("AAAA").unwrap_err(), CryptoError::TooShort);
        assert!(!format!("{cipher:?}").contains(KEY));
    }

    /// A value external-dns itself encrypted (its endpoint/crypto_test.go known-answer case):
    /// the same key and text must come back, whatever gzip produced on its side.
    #[test]
    fn reads_a_value_external_dns_encrypted() {
        let key = "s%zF`.*'5`9.AhI2!B,.~hmbs^.*TL?;";
        let sealed = concat!(
            "0Mfzf6wsN8llrfX0ucDZ6nlc2+QiQfKKedjPPLu5atb2I35L9nUZeJcCnuLVW7CVW3K0h94vSuBLdXnM",
            "rj8Vcm0M09shxaoF48IcCpD03XtQbKXqk2hPbsW6+JybvplHIQGr16/PcjUSObGmR9yjf38+qEltApkK",
            "vrPjsyw43BX4eE10rL0Bln33UJD7/w+zazRDPFlAcbGtkt0ETKHnvyB3/aCddLipvrhjCXj2ZY/ktRF6",
            "h716kJRgXU10dCIQHFYU45MIdxI+k10HK3yZqhI2V0Gp2xjrFV/LRQ7/OS9SFee4asPWUYxbCEsnOzp8",
            "qc0dCPFSo1dtADzWnUZnsAcbnjtudT4milfLJc5CxDk1v3ykqQ/ajejwHjWQ7b8U6AsTErbezfdcqrb5",
            "IzkLgHb5TosnfrdDmNc9GcKfpsrCHbVY8KgNwMVdtwavLv7d9WM6sooUlZ3t0sABGkzagXQmPRvwLnkS",
            "Olie5XrnzWo8/8/4UByLga29CaXO",
        );
        let plain = TxtCipher::from_key_text(key)
            .unwrap()
            .decrypt(sealed)
            .unwrap();
        assert!(
            plain.starts_with("Lorem Ipsum is simply dummy text"),
            "{plain}"
        );
        assert!(
            plain.ends_with("including versions of Lorem Ipsum."),
            "{plain}"
        );
        assert_eq!(plain.len(), 574);
    }
}

//! The client side of SCRAM (RFC 5802) with SHA-256 (RFC 7677) or SHA-512,
//! as Kafka speaks it: no channel binding, no SASLprep (Kafka's Java client
//! and broker take the password's UTF-8 bytes as they are, and so does
//! librdkafka), and an iteration count of at least 4096.
//!
//! The hashing comes from RustCrypto's `hmac`, `pbkdf2` and `sha2`; what is
//! ours is the message exchange, checked against RFC 7677's test vectors.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::{Digest, FixedOutputReset};
use hmac::{Mac, SimpleHmac};

/// Kafka's lowest iteration count; a server that asks for fewer is refused,
/// since it could be a man in the middle making the password cheap to guess.
const MIN_ITERATIONS: u32 = 4096;
/// Far above any real server's count; refused so that a hostile server
/// cannot make the client spin.
const MAX_ITERATIONS: u32 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScramError {
    #[error("the server's SCRAM message is malformed: {0}")]
    Malformed(String),
    #[error("the server's nonce does not extend ours")]
    Nonce,
    #[error("the server asks for {0} iterations, outside {MIN_ITERATIONS}..={MAX_ITERATIONS}")]
    Iterations(u32),
    #[error("the server refused: {0}")]
    Refused(String),
    #[error("the server's signature is wrong: it does not know the password")]
    ServerSignature,
}

/// One SCRAM exchange: [`client_first`](Self::client_first), then
/// [`client_final`](Self::client_final) with the server's first message,
/// then [`verify_server_final`](Self::verify_server_final).
pub struct ScramClient {
    hash: ScramHash,
    username: String,
    password: String,
    nonce: String,
    /// Set by `client_final`: the signature the server must prove.
    server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// With a fresh random nonce.
    pub fn new(hash: ScramHash, username: &str, password: &str) -> Self {
        let mut random = [0u8; 24];
        getrandom::fill(&mut random).expect("the system's random source");
        Self::with_nonce(hash, username, password, &BASE64.encode(random))
    }

    /// With a nonce of the caller's (tests use the RFC's).
    pub fn with_nonce(hash: ScramHash, username: &str, password: &str, nonce: &str) -> Self {
        ScramClient {
            hash,
            username: username.to_string(),
            password: password.to_string(),
            nonce: nonce.to_string(),
            server_signature: None,
        }
    }

    fn first_bare(&self) -> String {
        // RFC 5802's saslname: '=' and ',' escaped.
        let name = self.username.replace('=', "=3D").replace(',', "=2C");
        format!("n={name},r={}", self.nonce)
    }

    /// `n,,n=<user>,r=<nonce>`.
    pub fn client_first(&self) -> String {
        format!("n,,{}", self.first_bare())
    }

    /// The final message, with the proof, for `server_first`.
    pub fn client_final(&mut self, server_first: &str) -> Result<String, ScramError> {
        let attribute = |name: char| {
            server_first
                .split(',')
                .find_map(|part| part.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')))
                .ok_or_else(|| ScramError::Malformed(format!("no {name}= in '{server_first}'")))
        };
        if let Some(error) = server_first.strip_prefix("e=") {
            return Err(ScramError::Refused(error.to_string()));
        }
        let nonce = attribute('r')?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError::Nonce);
        }
        let salt = BASE64.decode(attribute('s')?).map_err(|e| ScramError::Malformed(format!("salt: {e}")))?;
        let iterations: u32 =
            attribute('i')?.parse().map_err(|_| ScramError::Malformed(format!("iterations in '{server_first}'")))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        // c=biws: base64 of the GS2 header "n,,".
        let without_proof = format!("c={},r={nonce}", BASE64.encode("n,,"));
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare());
        let keys = match self.hash {
            ScramHash::Sha256 => proof::<sha2::Sha256>(&self.password, &salt, iterations, &auth_message),
            ScramHash::Sha512 => proof::<sha2::Sha512>(&self.password, &salt, iterations, &auth_message),
        };
        self.server_signature = Some(keys.server_signature);
        Ok(format!("{without_proof},p={}", BASE64.encode(keys.client_proof)))
    }

    /// Checks that the server knew the password too.
    pub fn verify_server_final(&self, server_final: &str) -> Result<(), ScramError> {
        if let Some(error) = server_final.strip_prefix("e=") {
            return Err(ScramError::Refused(error.to_string()));
        }
        let given = server_final
            .split(',')
            .find_map(|part| part.strip_prefix("v="))
            .ok_or_else(|| ScramError::Malformed(format!("no v= in '{server_final}'")))?;
        let given = BASE64.decode(given).map_err(|e| ScramError::Malformed(format!("signature: {e}")))?;
        let expected = self.server_signature.as_ref().ok_or(ScramError::ServerSignature)?;
        // Not secret, but compared in constant time all the same.
        let differs =
            given.len() != expected.len() || given.iter().zip(expected).fold(0, |acc, (a, b)| acc | (a ^ b)) != 0;
        match differs {
            true => Err(ScramError::ServerSignature),
            false => Ok(()),
        }
    }
}

struct Proof {
    client_proof: Vec<u8>,
    server_signature: Vec<u8>,
}

fn proof<D>(password: &str, salt: &[u8], iterations: u32, auth_message: &str) -> Proof
where
    D: Digest + BlockSizeUser + FixedOutputReset + Clone + Sync,
{
    let mut salted = vec![0u8; <D as Digest>::output_size()];
    pbkdf2::pbkdf2::<SimpleHmac<D>>(password.as_bytes(), salt, iterations, &mut salted)
        .expect("HMAC takes keys of any length");
    let client_key = mac::<D>(&salted, b"Client Key");
    let stored_key = D::digest(&client_key);
    let client_signature = mac::<D>(&stored_key, auth_message.as_bytes());
    let client_proof = client_key.iter().zip(&client_signature).map(|(k, s)| k ^ s).collect();
    let server_key = mac::<D>(&salted, b"Server Key");
    Proof { client_proof, server_signature: mac::<D>(&server_key, auth_message.as_bytes()) }
}

fn mac<D: Digest + BlockSizeUser + Clone>(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = <SimpleHmac<D> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677, section 3: user "user", password "pencil".
    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str =
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    #[test]
    fn the_exchange_matches_rfc_7677s_test_vectors() {
        let mut client = ScramClient::with_nonce(ScramHash::Sha256, "user", "pencil", NONCE);
        assert_eq!(client.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(client.client_final(SERVER_FIRST).unwrap(), CLIENT_FINAL);
        client.verify_server_final(SERVER_FINAL).unwrap();
    }

    #[test]
    fn a_server_that_does_not_know_the_password_is_caught() {
        let mut client = ScramClient::with_nonce(ScramHash::Sha256, "user", "pencil", NONCE);
        client.client_final(SERVER_FIRST).unwrap();
        let forged = "v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
        assert_eq!(client.verify_server_final(forged), Err(ScramError::ServerSignature));
        assert_eq!(client.verify_server_final("e=invalid-proof"), Err(ScramError::Refused("invalid-proof".into())));
    }

    #[test]
    fn a_downgraded_or_replayed_server_first_is_refused() {
        let mut client = ScramClient::with_nonce(ScramHash::Sha512, "user", "pencil", NONCE);
        assert_eq!(client.client_final(&SERVER_FIRST.replace("i=4096", "i=1")), Err(ScramError::Iterations(1)));
        assert_eq!(client.client_final(&SERVER_FIRST.replace("r=rOpr", "r=XOpr")), Err(ScramError::Nonce));
        assert_eq!(client.client_final("r=rOprNGfwEbeRWgbNEkqO,s=W22Z,i=4096"), Err(ScramError::Nonce));
        assert!(matches!(client.client_final("r=rOprNGfwEbeRWgbNEkqOx,i=4096"), Err(ScramError::Malformed(_))));
        // A name with the two characters SCRAM escapes.
        let named = ScramClient::with_nonce(ScramHash::Sha512, "a=b,c", "p", NONCE);
        assert_eq!(named.client_first(), "n,,n=a=3Db=2Cc,r=rOprNGfwEbeRWgbNEkqO");
    }
}

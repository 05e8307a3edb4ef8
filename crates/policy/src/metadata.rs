//! Link-local addresses, where clouds serve each machine its instance
//! metadata (and the credentials of its role): no grant reaches them unless
//! the worker's policy names them.

use std::net::IpAddr;

/// The metadata services' names, which resolve to such addresses.
const METADATA_NAMES: [&str; 4] =
    ["metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal"];

/// 169.254.0.0/16 and fe80::/10, AWS's fd00:ec2::254 and Alibaba's
/// 100.100.100.200.
pub fn is_link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local() || v4.octets() == [100, 100, 100, 200],
        IpAddr::V6(v6) => {
            let aws: std::net::Ipv6Addr = "fd00:ec2::254".parse().expect("a literal address");
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || *v6 == aws
                || v6.to_ipv4_mapped().is_some_and(|v4| is_link_local(&v4.into()))
        }
    }
}

/// Whether `host` (a name or an IP, IPv6 maybe in brackets) is a metadata
/// service's.
pub fn is_metadata_host(host: &str) -> bool {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']').trim_end_matches('.');
    match host.parse::<IpAddr>() {
        Ok(ip) => is_link_local(&ip),
        Err(_) => METADATA_NAMES.iter().any(|name| host.eq_ignore_ascii_case(name)),
    }
}

/// The refusal of `what`, naming the policy key that could allow it.
pub fn refusal(what: &str, policy_key: &str) -> String {
    format!(
        "{what} is a link-local or instance-metadata address, which no grant reaches unless the worker's \
         {policy_key} names it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_hosts_are_known_by_address_and_name() {
        for host in ["169.254.169.254", "[fe80::1]", "fd00:ec2::254", "100.100.100.200", "Metadata.Google.Internal."] {
            assert!(is_metadata_host(host), "{host}");
        }
        for host in ["127.0.0.1", "10.0.0.1", "[::1]", "s3.amazonaws.com", "metadata.example.com"] {
            assert!(!is_metadata_host(host), "{host}");
        }
    }
}

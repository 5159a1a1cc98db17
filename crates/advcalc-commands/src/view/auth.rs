//! Who may read: the view serves rollouts on shared training nodes, so every request must
//! carry the random token printed in the URL (as `?token=`, then as the cookie the first
//! such request sets), compared in constant time, and name the view's own address in its
//! `Host` header (a page on another site that rebinds its DNS name to 127.0.0.1 sends its
//! own name there and is refused).

use std::net::{IpAddr, SocketAddr};

use tiny_http::Request;

use crate::error::{Error, Result};

/// The token's length in random bytes (128 bits).
const TOKEN_BYTES: usize = 16;

/// The view's token and the `Host` values it answers to.
pub struct Auth {
    token: String,
    cookie: String,
    /// Accepted `Host` header values (`None`: any, when bound to every interface, where the
    /// names the machine is reached by are not known; the token still holds).
    hosts: Option<Vec<String>>,
    url_host: String,
}

/// What a request may do.
pub enum Verdict {
    Allowed {
        /// The cookie to set (the first request, with the token in its URL).
        set_cookie: Option<String>,
    },
    Refused(String),
}

impl Auth {
    /// A fresh random token for a view listening on `addr` (bound as `host`).
    pub fn new(addr: SocketAddr, host: IpAddr) -> Result<Auth> {
        let mut raw = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut raw)
            .map_err(|e| Error::usage(format!("no random token for the view: {e}")))?;
        Ok(Self::with_token(
            addr,
            host,
            raw.iter().map(|b| format!("{b:02x}")).collect(),
        ))
    }

    fn with_token(addr: SocketAddr, host: IpAddr, token: String) -> Auth {
        let port = addr.port();
        let hosts = if host.is_unspecified() {
            None
        } else {
            let mut h = vec![format!("{}:{port}", bracket(host))];
            if host.is_loopback() {
                h.push(format!("localhost:{port}"));
                h.push(format!("127.0.0.1:{port}"));
                h.push(format!("[::1]:{port}"));
            }
            Some(h)
        };
        let url_host = if host.is_unspecified() {
            format!("127.0.0.1:{port}")
        } else {
            format!("{}:{port}", bracket(host))
        };
        Auth {
            token,
            // per port: two views on one machine keep their own cookies
            cookie: format!("advcalc_view_{port}"),
            hosts,
            url_host,
        }
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// `host:port` for the printed URL.
    pub fn url_host(&self) -> &str {
        &self.url_host
    }

    /// Check `Host`, then the token (query first, then cookie).
    pub fn check(&self, request: &Request) -> Verdict {
        let header = |name: &'static str| {
            request
                .headers()
                .iter()
                .filter(|h| h.field.equiv(name))
                .map(|h| h.value.as_str().to_string())
                .collect::<Vec<_>>()
        };
        self.decide(request.url(), &header("Host"), &header("Cookie"))
    }

    fn decide(&self, url: &str, host: &[String], cookies: &[String]) -> Verdict {
        if let Some(allowed) = &self.hosts {
            match host {
                [h] if allowed.iter().any(|a| a.eq_ignore_ascii_case(h)) => {}
                [h] => {
                    return Verdict::Refused(format!(
                        "Host {h:?} is not this view's address (open the URL advcalc view printed)"
                    ));
                }
                _ => return Verdict::Refused("one Host header is required".into()),
            }
        }
        let query = url.split_once('?').map_or("", |(_, q)| q);
        let query = query.split('#').next().unwrap_or("");
        let from_query = query
            .split('&')
            .filter_map(|kv| kv.strip_prefix("token="))
            .any(|t| same(t.as_bytes(), self.token.as_bytes()));
        if from_query {
            return Verdict::Allowed {
                set_cookie: Some(format!(
                    "{}={}; Path=/; HttpOnly; SameSite=Strict",
                    self.cookie, self.token
                )),
            };
        }
        let from_cookie = cookies
            .iter()
            .flat_map(|c| c.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .any(|(k, v)| k == self.cookie && same(v.as_bytes(), self.token.as_bytes()));
        if from_cookie {
            Verdict::Allowed { set_cookie: None }
        } else {
            Verdict::Refused(
                "a missing or wrong token (open the URL advcalc view printed, with its ?token=)"
                    .into(),
            )
        }
    }
}

fn bracket(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// Equal, in time that depends on the lengths only (never on where they differ).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(host: &str) -> Auth {
        let host: IpAddr = host.parse().unwrap();
        Auth::with_token(SocketAddr::new(host, 8123), host, "ab12".into())
    }

    fn allowed(v: Verdict) -> bool {
        matches!(v, Verdict::Allowed { .. })
    }

    #[test]
    fn the_token_in_the_query_sets_a_cookie_that_is_enough_afterwards() {
        let a = auth("127.0.0.1");
        let host = ["127.0.0.1:8123".to_string()];
        match a.decide("/?token=ab12", &host, &[]) {
            Verdict::Allowed {
                set_cookie: Some(c),
            } => assert!(c.starts_with("advcalc_view_8123=ab12;") && c.contains("HttpOnly")),
            _ => panic!("allowed with a cookie"),
        }
        assert!(allowed(a.decide(
            "/api/overview",
            &host,
            &["x=1; advcalc_view_8123=ab12".into()]
        )));
    }

    #[test]
    fn no_token_a_wrong_one_or_another_view_s_cookie_is_refused() {
        let a = auth("127.0.0.1");
        let host = ["localhost:8123".to_string()];
        assert!(!allowed(a.decide("/", &host, &[])));
        assert!(!allowed(a.decide("/?token=ab13", &host, &[])));
        assert!(!allowed(a.decide("/?token=ab1", &host, &[])));
        assert!(!allowed(a.decide("/?xtoken=ab12", &host, &[])));
        assert!(!allowed(a.decide(
            "/",
            &host,
            &["advcalc_view_9999=ab12".into()]
        )));
    }

    #[test]
    fn a_host_that_is_not_the_view_s_address_is_refused_even_with_the_token() {
        let a = auth("127.0.0.1");
        for h in ["evil.example:8123", "127.0.0.1:9999", "localhost"] {
            assert!(!allowed(a.decide("/?token=ab12", &[h.into()], &[])), "{h}");
        }
        assert!(!allowed(a.decide("/?token=ab12", &[], &[])));
        assert!(!allowed(a.decide(
            "/?token=ab12",
            &["127.0.0.1:8123".into(), "evil:8123".into()],
            &[]
        )));
        assert!(allowed(a.decide(
            "/?token=ab12",
            &["LOCALHOST:8123".into()],
            &[]
        )));
    }

    #[test]
    fn bound_to_every_interface_any_host_is_accepted_but_the_token_is_still_needed() {
        let a = auth("0.0.0.0");
        assert!(allowed(a.decide(
            "/?token=ab12",
            &["node17:8123".into()],
            &[]
        )));
        assert!(!allowed(a.decide("/", &["node17:8123".into()], &[])));
        assert_eq!(a.url_host(), "127.0.0.1:8123");
    }

    #[test]
    fn comparison_needs_equal_lengths_and_bytes() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}

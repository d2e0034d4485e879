//! `Link`: what an API handler asks the coordinator through, carrying the
//! address of the peer it asks for, so the coordinator can share its
//! history readers out per peer (one busy dashboard or script cannot
//! starve the others).

use crate::http::bridge::{BridgeError, CoordinatorLink};
use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use std::future::{ready, Ready};
use std::net::IpAddr;
use std::ops::Deref;
use taskyard_protocol::{ClientRequest, ClientResponse};

/// The app's `CoordinatorLink` and the requesting peer's address.
pub struct Link {
    link: web::Data<CoordinatorLink>,
    peer: Option<IpAddr>,
}

impl Link {
    /// `CoordinatorLink::request` on behalf of this request's peer.
    pub async fn request(&self, request: ClientRequest) -> Result<ClientResponse, BridgeError> {
        self.link.request_from(self.peer, request).await
    }
}

impl Deref for Link {
    type Target = CoordinatorLink;

    fn deref(&self) -> &CoordinatorLink {
        &self.link
    }
}

impl FromRequest for Link {
    type Error = actix_web::Error;
    type Future = Ready<Result<Link, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let peer = req.peer_addr().map(|addr| addr.ip());
        ready(match req.app_data::<web::Data<CoordinatorLink>>() {
            Some(link) => Ok(Link {
                link: link.clone(),
                peer,
            }),
            None => Err(actix_web::error::ErrorInternalServerError(
                "the HTTP server was started without a coordinator link",
            )),
        })
    }
}

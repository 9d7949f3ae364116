"""Listener security: TLS, SASL (PLAIN, SCRAM) and the StandardAuthorizer's ACLs.

`listeners` resolves what each listener speaks (listener.security.protocol.map and the
listener.name.<l>.* overrides); `ssl_contexts` builds Python SSLContexts from Kafka's ssl.*
keys; `principal` names the peer; `scram`/`plain` are the SASL mechanisms (sans-IO, both
sides); `sasl_server` is the broker's per-connection authenticator; `client` is what the
broker's own clients and kopfka's tools use to connect to a secured listener; `authorizer`
is Kafka's StandardAuthorizer over the ACLs of the metadata image.
"""

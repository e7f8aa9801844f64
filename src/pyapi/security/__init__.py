"""seglog.security: listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), TLS, SASL (PLAIN, SCRAM-SHA-256/512)
and the SCRAM credential store, with Kafka's configuration names and wire behaviour."""

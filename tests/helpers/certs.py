"""A certificate authority for the TLS tests: a CA, certificates it signs (server, client, expired) and a
self-signed one, written as PEM files (key + chain in one file, as ssl.keystore.location with
ssl.keystore.type=PEM holds them, and apart for the clients that want them so)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Issued:
    cert: Path          # the certificate (PEM)
    key: Path           # its private key (PEM, unencrypted)
    keystore: Path      # key + certificate chain in one PEM file


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "seglog tests")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "seglog test CA"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(days=1))
                      .not_valid_after(now + datetime.timedelta(days=30))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.cert = self.dir / f"{name.replace(' ', '-')}.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, *, ou: str | None = None, hosts=("127.0.0.1", "localhost"), expired: bool = False,
              self_signed: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = ((now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)) if expired
                      else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)))
        sans = [x509.IPAddress(ipaddress.ip_address(h)) if h[0].isdigit() else x509.DNSName(h) for h in hosts]
        subject = _name(cn, ou)
        builder = (x509.CertificateBuilder().subject_name(subject)
                   .issuer_name(subject if self_signed else self._cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(key if self_signed else self._key, hashes.SHA256())
        stem = self.dir / cn.replace(" ", "-")
        out = Issued(stem.with_suffix(".crt"), stem.with_suffix(".key"), stem.with_suffix(".keystore.pem"))
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        chain = cert.public_bytes(serialization.Encoding.PEM)
        if not self_signed:
            chain += self._cert.public_bytes(serialization.Encoding.PEM)
        out.cert.write_bytes(chain)
        out.key.write_bytes(key_pem)
        out.keystore.write_bytes(key_pem + chain)
        return out

"""Certificates and tokens for one run of the real control plane, generated at start.

One CA signs every serving certificate (kube-apiserver, the Kueue webhook server) and the
apiserver's client certificate for its aggregation proxy; each is valid for ``127.0.0.1`` and
``localhost`` only. Bearer tokens go to a static token file (``--token-auth-file``): the admin
token (group ``system:masters``) is what the kubeconfig and the Kueue manager carry.
Nothing here outlives the run's directory.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "new_token"]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


@dataclass
class Pki:
    """The files of one run: ``ca.crt``, and ``<name>.crt``/``<name>.key`` pairs."""

    directory: Path

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._ca_key = _key()
        now = dt.datetime.now(dt.UTC)
        self._ca = (x509.CertificateBuilder().subject_name(_name("gpuaas-real-ca")).issuer_name(_name("gpuaas-real-ca"))
                    .public_key(self._ca_key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=7))
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                    .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                                   critical=True)
                    .sign(self._ca_key, hashes.SHA256()))
        self.ca_pem = self._ca.public_bytes(serialization.Encoding.PEM)
        self.ca_file.write_bytes(self.ca_pem)
        # The apiserver signs service-account tokens with this key and checks them with its public half.
        sa = _key()
        self.sa_key_file.write_bytes(sa.private_bytes(serialization.Encoding.PEM,
                                                      serialization.PrivateFormat.TraditionalOpenSSL,
                                                      serialization.NoEncryption()))
        self.sa_key_file.chmod(0o600)
        self.sa_pub_file.write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                                  serialization.PublicFormat.SubjectPublicKeyInfo))

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def sa_key_file(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub_file(self) -> Path:
        return self.directory / "sa.pub"

    def issue(self, name: str, *, server: bool = True, common: str | None = None) -> tuple[Path, Path]:
        """A certificate for loopback, signed by the CA: ``(crt, key)`` paths."""
        key = _key()
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder().subject_name(_name(common or name)).issuer_name(self._ca.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=7))
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        crt, pem = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pem.write_bytes(_pem_key(key))
        pem.chmod(0o600)
        return crt, pem

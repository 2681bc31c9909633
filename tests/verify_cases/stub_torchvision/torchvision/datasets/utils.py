import hashlib
import os


def check_md5(fpath, md5, **kwargs):
    with open(fpath, "rb") as handle:
        return hashlib.md5(handle.read()).hexdigest() == md5


def check_integrity(fpath, md5=None):
    if not os.path.isfile(fpath):
        return False
    return md5 is None or check_md5(fpath, md5)

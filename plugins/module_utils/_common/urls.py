# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one masking of credentials inside URLs, for every message, outcome line, summary and report. Private to the
collection.

A package index or mirror may carry its credentials in the URL (https://user:password@host/simple, as pip and uv
read them). The URL is used as given; wherever it is shown, its userinfo part (everything between `scheme://` and the
last `@` before the host) is replaced by MASK, so neither the password nor the user name appears.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "****"
# scheme://userinfo@ : the userinfo runs to the last '@' before the path, query or fragment (an unencoded '@' in a
# password is taken as part of it, as urllib does), and holds no whitespace.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*(?:@[^/?#@\s]*)*@")


def mask_userinfo(text: Any) -> Any:
    """`text` with the userinfo of every URL in it masked; anything but a string is returned as it is."""
    if not isinstance(text, str):
        return text
    return _USERINFO.sub(lambda m: "%s%s@" % (m.group(1), MASK), text)

"""A real headless Chromium for the tests (Debian's `chromium`, driven by Playwright through executable_path; nothing
here downloads a browser), and a person's device in it: a page with the DevTools protocol's virtual authenticator,
which creates and signs with passkeys as a laptop's would (/work/shared/host-facts/webauthn.md).

Shared by the web inbox's tests and every test where a person uses a passkey (tests/e2e, tests/hosts).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from weakref import WeakKeyDictionary

from conftest import loud_skip
from harness import PATIENCE

CHROMIUM = os.environ.get("MCPX_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT_MS = PATIENCE * 1000


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        loud_skip(f"no chromium at {CHROMIUM} (./dev test installs Debian's)")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        loud_skip("playwright (Python) is not installed (./dev test installs it)")
    async with async_playwright() as pw:
        # root has no user namespace sandbox here; the pages are our own, on loopback
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=TIMEOUT_MS)
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def page_of(browser: Any, **options: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 900, "height": 1200}, **options)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield await context.new_page()
    finally:
        await context.close()


# each person_page's authenticator: its page's CDP session and the authenticator's id
_AUTHENTICATORS: WeakKeyDictionary[Any, tuple[Any, str]] = WeakKeyDictionary()


async def add_authenticator(page: Any) -> None:
    """A virtual platform authenticator with user verification, on `page`."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    added = await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserVerified": True}})
    _AUTHENTICATORS[page] = (cdp, str(added["authenticatorId"]))


async def copy_passkeys(source: Any, target: Any) -> None:
    """Every passkey on `source`'s authenticator, copied to `target`'s (as a passkey synced to a new device is);
    their sign counts go on from where they were."""
    cdp, authenticator = _AUTHENTICATORS[source]
    held = (await cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator}))["credentials"]
    cdp, authenticator = _AUTHENTICATORS[target]
    for credential in held:
        await cdp.send("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": credential})


@asynccontextmanager
async def person_page(browser: Any) -> AsyncIterator[Any]:
    """A page with its own virtual authenticator (a platform one, with user verification): one person's device."""
    context = await browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await add_authenticator(page)
        yield page
    finally:
        await context.close()


async def create_passkey(page: Any, url: str, person: str) -> str:
    """On the enrolment page at `url`, create `person`'s passkey; what the page says came of it."""
    assert re.fullmatch(r"http://localhost:\d+/inbox/enroll/[\w-]+", url), url  # a passkey needs a name
    await page.goto(url)
    await page.click("#enroll")
    status = page.locator("#passkey-status:not(:empty)")
    await status.wait_for()
    return str(await status.inner_text())


async def vouch_on_page(page: Any) -> str:
    """On an enrolment page whose new passkey waits to be vouched for, sign with a passkey this device has; what the
    page says came of it."""
    await page.click("#vouch")
    status = page.locator("#passkey-status:has-text('vouched for'), #passkey-status.error-box")
    await status.wait_for()
    return str(await status.inner_text())


async def sign_on_page(page: Any, url: str, fill: dict[str, str] | None = None, yes: str | None = None) -> str:
    """Accept the question at `url` with this page's passkey (`yes`: a yes/no field answered yes first); what the
    page says came of it."""
    await page.goto(url)
    for name, value in (fill or {}).items():
        await page.fill(f'input[name="{name}"]', value)
    if yes is not None:
        await page.check(f'input[name="{yes}"][value="true"]')
    await page.click("#accept")
    status = page.locator("#passkey-status:not(:empty)")
    await status.wait_for()
    return str(await status.inner_text())

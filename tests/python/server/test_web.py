"""The chat page in Debian's chromium (headless, via Playwright): send a message and see the
streamed answer (Markdown + highlighted code), stop a generation, switch chats. A
screenshot goes to tests/artifacts/web_chat.png."""
import os
import pathlib

import pytest

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = pathlib.Path(__file__).resolve().parents[2] / "artifacts"


@pytest.fixture(scope="module")
def page(server):
    if not os.path.exists(CHROMIUM):
        pytest.skip("no /usr/bin/chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        pg = browser.new_page()
        pg.set_default_timeout(30000)
        pg.goto(server.url + "/")
        yield pg
        browser.close()


def last_answer(page):
    return page.locator(".msg.assistant").last


def test_send_and_stream(page):
    page.fill("#input", "hello web\n```python\nprint(1)\n```\nend")
    page.click("#send")
    ans = last_answer(page)
    sync_api.expect(ans.locator(".stats")).to_contain_text("cached", timeout=30000)
    sync_api.expect(ans.locator(".content")).to_contain_text("Echo: hello web")
    sync_api.expect(ans.locator(".content")).to_contain_text("Done.")
    assert ans.locator("pre code.hljs").count() == 1  # fenced code highlighted
    assert page.locator(".msg.user").first.inner_text().startswith("hello web")


def test_stop_generation(page):
    page.fill("#set-max_tokens", "20000")
    page.fill("#input", "count for me")
    page.click("#send")
    ans = last_answer(page)
    sync_api.expect(ans.locator(".content")).to_contain_text("1 2 3 4 5", timeout=30000)
    page.click("#stop")
    sync_api.expect(ans.locator(".stats")).to_contain_text("stopped", timeout=30000)
    text = ans.locator(".content").inner_text()
    assert text.startswith("1 2 3 4 5")
    assert "20000" not in text  # stopped long before the end
    assert page.locator("#send").is_enabled()


def test_switch_chats(page):
    page.fill("#set-max_tokens", "")
    page.click("#new-chat")
    assert page.locator(".chat-item").count() == 2
    assert page.locator(".msg").count() == 0
    page.fill("#input", "second chat")
    page.click("#send")
    sync_api.expect(last_answer(page).locator(".content")).to_have_text("Echo: second chat. Done.", timeout=30000)
    page.locator(".chat-item").nth(1).click()  # the first chat (newest is on top)
    sync_api.expect(page.locator(".msg.user").first).to_contain_text("hello web")
    assert page.locator(".msg.assistant").count() == 2
    page.locator(".chat-item").nth(0).click()
    sync_api.expect(page.locator(".msg.user").first).to_have_text("second chat")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web_chat.png"), full_page=True)

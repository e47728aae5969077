// The browser's time zone, for the server to show times in (brickadmin/accounts/middleware.py):
// written once and again only when it changes; the next page uses it.
(function () {
  var zone;
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
  if (!zone || zone.length > 64) return;
  // Written as is (Asia/Seoul): a zone name's characters are all allowed in a cookie value, and
  // the server reads a percent-encoded one (Asia%2FSeoul) the same.
  if (!/^[A-Za-z0-9_+\-\/]+$/.test(zone)) return;
  var cookie = "brick_tz=" + zone;
  if (document.cookie.split("; ").indexOf(cookie) !== -1) return;
  document.cookie = cookie + "; path=/; max-age=31536000; SameSite=Lax" + (location.protocol === "https:" ? "; Secure" : "");
})();

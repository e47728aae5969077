// The browser's time zone, for the server to show times in (brickadmin/accounts/middleware.py):
// written once and again only when it changes; the next page uses it.
(function () {
  var zone;
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
  if (!zone || zone.length > 64) return;
  var cookie = "brick_tz=" + encodeURIComponent(zone);
  if (document.cookie.split("; ").indexOf(cookie) !== -1) return;
  document.cookie = cookie + "; path=/; max-age=31536000; SameSite=Lax" + (location.protocol === "https:" ? "; Secure" : "");
})();

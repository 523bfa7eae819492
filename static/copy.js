// Copy-to-clipboard for the settings page: a button with data-copy="<id>" copies that element's
// value or text. The only script of the pages; everything works without it (the buttons stay
// hidden and the text can be selected by hand).
document.querySelectorAll("button[data-copy]").forEach(function (button) {
  var label = button.firstChild ? button.firstChild.textContent : "Copy";
  button.hidden = false;
  button.addEventListener("click", function () {
    var el = document.getElementById(button.getAttribute("data-copy"));
    if (!el) return;
    var text = "value" in el ? el.value : el.textContent;
    var done = function (ok) {
      button.firstChild.textContent = ok ? "Copied" : "Select and copy";
      setTimeout(function () { button.firstChild.textContent = label; }, 2000);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
    } else {
      if ("select" in el) { el.select(); }
      done(document.execCommand && document.execCommand("copy"));
    }
  });
});

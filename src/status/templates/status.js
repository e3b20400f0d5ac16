// Narrows the rows on this page as the text filter is typed; the form still filters every page.
(function () {
  var input = document.getElementById("filter-text");
  if (!input) {
    return;
  }
  var rows = document.querySelectorAll("#names tbody tr");
  input.addEventListener("input", function () {
    var text = input.value.trim().toLowerCase();
    rows.forEach(function (row) {
      row.hidden = text !== "" && row.textContent.toLowerCase().indexOf(text) < 0;
    });
  });
})();

(function(){
  var box=document.getElementById('q'), count=document.getElementById('count');
  var items=[].slice.call(document.querySelectorAll('details.msg'));
  var texts=items.map(function(el){return el.textContent.toLowerCase();});
  var groups=[].slice.call(document.querySelectorAll('section.group'));
  function apply(){
    var terms=box.value.toLowerCase().split(/\s+/).filter(Boolean), shown=0;
    items.forEach(function(el,i){
      var ok=terms.every(function(t){return texts[i].indexOf(t)>=0;});
      el.hidden=!ok; if(ok) shown++;
    });
    groups.forEach(function(g){g.hidden=!g.querySelector('details.msg:not([hidden])');});
    count.textContent=shown+' of '+items.length+' messages';
    document.body.setAttribute('data-visible',String(shown));
  }
  box.addEventListener('input',apply);
  var m=/[#&]q=([^&]*)/.exec(location.hash);
  if(m){box.value=decodeURIComponent(m[1].replace(/\+/g,' '));}
  apply();
  document.body.setAttribute('data-ready','1');
})();
